package redisstore

import (
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/ratelimit"
)

// The lean scripts decide one OpAllow request: the hot path. They are the
// arithmetic of the batch script (scripts.go) written out for one request
// and one algorithm, straight-line, because every Lua operation costs Redis
// time (measured on Redis 7.0 with INFO commandstats: string.format of two
// numbers 0.77 µs, parsing a "w c" state 0.41, a tonumber 0.11, struct.pack
// and struct.unpack 0.16 and 0.08, creating a closure or a table a few
// tenths). So:
//
//   - the state is binary, struct.pack('<dd') of its numbers (three for a
//     sliding window), all integers below 2^53 and so exact as doubles;
//   - the policy and the cost travel as one binary argument, unpacked by
//     one struct.unpack, instead of eight decimal strings each read by
//     tonumber (the argument of a cost of 1 is built once per policy);
//   - TTLs and scores are passed to redis.call as numbers (Redis formats an
//     integral number as an integer), not through string.format;
//   - no helper function: each exact floor division (fdm of scripts.go) is
//     written out where it is used, on the admission path at least;
//   - the answer is one packed string, not a table;
//   - math.floor and math.max are read from the globals once per call.
//
// Each takes
//
//	KEYS[1]  the key
//	KEYS[2]  the key of the text state of earlier versions (legacy mode L > 0)
//	ARGV[1]  struct.pack('<dddddddd', period µs, burst, r, p, cap, least expiry ms, n, L)
//	ARGV[2]  now in µs (WithCallerTime only; else the server's TIME)
//
// and returns struct.pack('<dddd', allowed, remaining, retry µs, reset µs):
// one bulk string, which costs Redis less than a table of four integers
// (measured: 0.1 of the floor's time, see docs/benchmarks-ratelimit.md) and
// the client no array to allocate. A refused request
// writes nothing (a sliding log's refusal may drop stamps that every later
// decision ignores).
//
// Where the server has Redis Functions (7.0 and later) and the client is a
// *redis.Client, the same bodies are registered once as the functions of a
// library and called with FCALL, which skips the per-call compilation
// lookup and the script environment's set-up that EVALSHA pays (measured:
// an empty FCALL 0.7–1.1 µs of server time, an empty EVALSHA 1.2–1.6). The
// library's name carries a hash of its source, so two versions of this
// package on one Redis never call each other's code. Elsewhere (older
// Redis, Cluster, Ring) the bodies run as scripts with EVALSHA.
//
// L is the store's LegacyState: where KEYS[1] holds no state and L > 0 the
// body reads the text state of KEYS[2] (leanRead); with L = LegacyShare it
// then decides on that key and writes it back as text (leanWrite), so that
// processes of earlier versions count with this one.
//
// This is the one place where the arithmetic is written a second time (the
// conformance suite checks both copies against package ratelimit).

// leanHead reads the arguments and the time.
const leanHead = `
local floor, max = math.floor, math.max
local P, b, r, per, cap, minTTL, n, L = struct.unpack('<dddddddd', ARGV[1])
local now
if ARGV[2] then now = tonumber(ARGV[2]) else local t = redis.call('TIME'); now = t[1] * 1000000 + t[2] end
local k, text = KEYS[1], false
`

// leanRead reads the state of KEYS[1] into the Lua locals names (as many
// as the format '<d…' has d's), leaving them nil for a fresh key, and
// sets v to what it read. Where KEYS[1] has no state and L > 0 it reads
// the text state of KEYS[2] ("a b", "a b c": the numbers as decimal
// integers) instead; with L = 2 (LegacyShare) k and v then name that key
// and its text, and text is true, so the body writes the text back there.
// With L = 1 (LegacyCarry) v stays nil: the state is carried over and
// written to KEYS[1].
func leanRead(names, format string) string {
	pat := strings.Repeat(" (%-?%d+)", len(format)-1)[1:]
	var conv []string
	for _, n := range strings.Split(names, ", ") {
		conv = append(conv, "tonumber("+n+")")
	}
	return `
local v = redis.call('GET', k)
local ` + names + `
if v then ` + names + ` = struct.unpack('` + format + `', v)
elseif L > 0 then
  local t = redis.call('GET', KEYS[2])
  if t then
    ` + names + ` = string.match(t, '^` + pat + `$')
    ` + names + ` = ` + strings.Join(conv, ", ") + `
  end
  if L == 2 then k, v, text = KEYS[2], t, true end
end
`
}

// leanWrite writes the state values to k with the expiry ttl (ms): binary
// in format, or as text where leanRead chose the text key.
func leanWrite(values, format, ttl string) string {
	return `local st
if text then st = string.format('` + strings.TrimSpace(strings.Repeat(" %.0f", len(format)-1)) + `', ` + values + `)
else st = struct.pack('` + format + `', ` + values + `) end
redis.call('SET', k, st, 'PX', ` + ttl + `)
`
}

// leanFixedWindow is ratelimit's fixedWindow; state '<dd' w c.
var leanFixedWindow = leanHead + leanRead("sw, c", "<dd") + `
local lag = 0
if sw and sw * P > now then lag = sw * P - now; now = sw * P end -- keyTime
local w = floor(now / P)
local e = now - w * P
if e < 0 then w = w - 1; e = e + P elseif e >= P then w = w + 1; e = e - P end
local toEnd = P - e + lag
if sw ~= w then c = 0 end
if n > b - c then return struct.pack('<dddd', 0, b - c, toEnd, toEnd) end
c = c + n
if c == 0 then
  if v then redis.call('DEL', k) end
  return struct.pack('<dddd', 1, b, 0, 0)
end
` + leanWrite("w, c", "<dd", "max(minTTL, floor(toEnd / 1000) + 1)") + `return struct.pack('<dddd', 1, b - c, 0, toEnd)
`

// leanSlidingWindow is ratelimit's slidingWindow; state '<ddd' w prev curr.
var leanSlidingWindow = leanHead + leanRead("sw, sp, sc", "<ddd") + `
local prev, curr, lag = 0, 0, 0
if sw and sw * P > now then lag = sw * P - now; now = sw * P end -- keyTime
local w = floor(now / P)
local e = now - w * P
if e < 0 then w = w - 1; e = e + P elseif e >= P then w = w + 1; e = e - P end
if sw == w then prev, curr = sp, sc elseif sw == w - 1 then prev = sc end
local x = prev * (P - e)
local weight = floor(x / P)
local m = x - weight * P
if m < 0 then weight = weight - 1; m = m + P elseif m >= P then weight = weight + 1; m = m - P end
if m > 0 then weight = weight + 1 end
if curr + n + weight > b then
  local function fdm(a, c)
    local q = floor(a / c)
    local mm = a - q * c
    if mm < 0 then q = q - 1 elseif mm >= c then q = q + 1 end
    return q
  end
  local reset = P - e + lag
  if curr > 0 then reset = 2 * P - e + lag end
  local rem = max(0, b - curr - weight)
  local a = b - curr - n
  if a >= 0 then
    local kk = fdm(a * P, prev)
    if kk > 0 then return struct.pack('<dddd', 0, rem, P - kk - e + lag, reset) end
  end
  local y = 0
  a = b - n
  if curr > a then y = P - fdm(a * P, curr) end
  return struct.pack('<dddd', 0, rem, P - e + y + lag, reset)
end
curr = curr + n
local rem = b - curr - weight
local reset = 0
if curr > 0 then reset = 2 * P - e + lag elseif prev > 0 then reset = P - e + lag end
if reset == 0 then
  if v then redis.call('DEL', k) end
  return struct.pack('<dddd', 1, rem, 0, 0)
end
` + leanWrite("w, prev, curr", "<ddd", "max(minTTL, floor(reset / 1000) + 1)") + `return struct.pack('<dddd', 1, rem, 0, reset)
`

// leanBucket is ratelimit's bucket for TokenBucket (state '<dd' d t) and
// GCRA (state '<dd' tat fraction); GCRA is replaced by true or false.
var leanBucket = leanHead + leanRead("a, s", "<dd") + `
local d, lag = 0, 0
if a then
  if GCRA then
    if a >= now then d = (a - now) * r + s end
  elseif a > 0 then
    if s > now then lag = s - now; now = s end -- keyTime
    local el = now - s
    -- el·r ≤ a is el ≤ ⌊a/r⌋; a product past 2^53 rounds but stays above a < 2^53.
    if el <= 0 then d = a elseif el * r <= a then d = a - el * r end
  end
end
local need = d + n * per
if need > cap then
  local function cdiv(x, y)
    local q = floor(x / y)
    local mm = x - q * y
    if mm < 0 then q = q - 1; mm = mm + y elseif mm >= y then q = q + 1; mm = mm - y end
    if mm > 0 then q = q + 1 end
    return q
  end
  local left = max(0, cap - d)
  local rem = floor(left / per)
  local mr = left - rem * per
  if mr < 0 then rem = rem - 1 elseif mr >= per then rem = rem + 1 end
  local z = cdiv(d, r)
  if z > 0 then z = z + lag end
  return struct.pack('<dddd', 0, rem, cdiv(need - cap, r) + lag, z)
end
if need <= 0 then
  if v then redis.call('DEL', k) end
  local rem = floor(cap / per)
  local mr = cap - rem * per
  if mr < 0 then rem = rem - 1 elseif mr >= per then rem = rem + 1 end
  return struct.pack('<dddd', 1, rem, 0, 0)
end
local q = floor(need / r)
local mq = need - q * r
if mq < 0 then q = q - 1; mq = mq + r elseif mq >= r then q = q + 1; mq = mq - r end
local reset = q
if mq > 0 then reset = q + 1 end
reset = reset + lag
local left = cap - need
local rem = floor(left / per)
local mr = left - rem * per
if mr < 0 then rem = rem - 1 elseif mr >= per then rem = rem + 1 end
local x, y = need, now
if GCRA then x, y = now + q, mq end
` + leanWrite("x, y", "<dd", "max(minTTL, floor(reset / 1000) + 1)") + `return struct.pack('<dddd', 1, rem, 0, reset)
`

// leanSlidingLog is ratelimit's slidingLog on the sorted set of the batch
// script (members "t:i", scores t): decided at max(now, newest stamp), it
// counts the stamps in (t − P, t]. Stamps at or before t − P are dropped
// when units are admitted (the newest stamp is then t, and no later
// decision looks before it) or when none is left in the window.
const leanSlidingLog = leanHead + `
local top = redis.call('ZRANGE', k, -1, -1, 'WITHSCORES')
local t, c = now, 0
local cut
if top[2] then
  local newest = tonumber(top[2])
  if newest > t then t = newest end
  cut = string.format('%.0f', t - P)
  c = redis.call('ZCOUNT', k, '(' .. cut, '+inf')
  if c == 0 then redis.call('DEL', k) end
end
if c + n > b then
  local j = c + n - b - 1
  local at = tonumber(redis.call('ZRANGEBYSCORE', k, '(' .. cut, '+inf', 'WITHSCORES', 'LIMIT', j, 1)[2])
  return struct.pack('<dddd', 0, b - c, at + P - now, tonumber(top[2]) + P - now)
end
if n == 0 then
  if c == 0 then return struct.pack('<dddd', 1, b, 0, 0) end
  return struct.pack('<dddd', 1, b - c, 0, tonumber(top[2]) + P - now)
end
if cut and c > 0 then redis.call('ZREMRANGEBYSCORE', k, '-inf', cut) end
local ts = string.format('%.0f', t)
local i, added = c, 0
while added < n do
  i = i + 1
  added = added + redis.call('ZADD', k, 'NX', t, ts .. ':' .. i)
end
redis.call('PEXPIRE', k, max(minTTL, floor((t - now + P) / 1000) + 1))
return struct.pack('<dddd', 1, b - c - n, 0, t + P - now)
`

// leanBodies are the lean scripts by algorithm.
var leanBodies = [...]string{
	ratelimit.FixedWindow:   leanFixedWindow,
	ratelimit.SlidingLog:    leanSlidingLog,
	ratelimit.SlidingWindow: leanSlidingWindow,
	ratelimit.TokenBucket:   strings.ReplaceAll(leanBucket, "GCRA", "false"),
	ratelimit.GCRA:          strings.ReplaceAll(leanBucket, "GCRA", "true"),
}

// leanScripts are the lean bodies as scripts, for EVALSHA.
var leanScripts [len(leanBodies)]*redis.Script

// The Redis Functions library of the lean bodies: leanLibrary is its
// source (for FUNCTION LOAD REPLACE), leanFunctions the functions' names
// by algorithm.
var (
	leanLibrary   string
	leanFunctions [len(leanBodies)]string
)

func init() {
	var src strings.Builder
	for a, body := range leanBodies {
		if body != "" {
			leanScripts[a] = redis.NewScript(body)
			src.WriteString(body)
		}
	}
	sum := sha1.Sum([]byte(src.String()))
	version := hex.EncodeToString(sum[:6])
	var lib strings.Builder
	lib.WriteString("#!lua name=sluice_" + version + "\n")
	for a, body := range leanBodies {
		if body == "" {
			continue
		}
		name := "sluice_" + algTag[a] + "_" + version
		leanFunctions[a] = name
		lib.WriteString("redis.register_function('" + name + "', function(KEYS, ARGV)\n" + body + "end)\n")
	}
	leanLibrary = lib.String()
}

// leanAnswer decodes a lean script's answer (see above).
func leanAnswer(s string) ([4]int64, error) {
	var v [4]int64
	if len(s) != 32 {
		return v, fmt.Errorf("sluice/redisstore: script answered %d bytes for 32", len(s))
	}
	for i := range v {
		v[i] = int64(math.Float64frombits(binary.LittleEndian.Uint64([]byte(s[8*i : 8*i+8]))))
	}
	return v, nil
}

// leanPolicy returns ARGV[1] of the lean scripts for a policy's arguments
// (alg, period µs, burst, r, p, cap), the least expiry in ms, a cost n and
// the store's LegacyState.
func leanPolicy(args [6]int64, minTTL, n int64, legacy LegacyState) string {
	var b [64]byte
	for i, x := range [8]int64{args[1], args[2], args[3], args[4], args[5], minTTL, n, legacy.code()} {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(float64(x)))
	}
	return string(b[:])
}
