//go:build !purego

package ratelimit

// prefetch asks the CPU to bring the cache line at addr closer, without
// waiting for it and without faulting on any address (PREFETCHT0).
func prefetch(addr uintptr)
