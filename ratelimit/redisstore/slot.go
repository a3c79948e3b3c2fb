package redisstore

import "strings"

// clusterSlot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of
// its hash tag — the text between the first '{' and the next '}', if not
// empty — or of the whole key, modulo 16384.
func clusterSlot(key string) uint16 {
	key = hashTag(key)
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

// hashTag returns the part of key that Redis Cluster (and a go-redis Ring)
// hashes: the text between the first '{' and the next '}', if not empty,
// else the whole key.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}
