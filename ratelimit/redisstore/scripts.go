package redisstore

import (
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/ratelimit"
)

// The Lua side of the store. Redis runs Lua 5.1, whose numbers are IEEE
// doubles: integers are exact up to 2^53. The scripts therefore count time
// in whole microseconds (Redis's TIME resolution; a Unix instant in µs stays
// below 2^53 until the year 2255) and keep every other quantity below 2^53,
// which toPolicy checks for each Policy before it is ever sent. With that,
// every operation below is exact integer arithmetic: sums and differences
// of exact integers below 2^53, products checked to stay below it, and
// divisions through fdm, which corrects the rounded quotient.
//
// The arithmetic is that of package ratelimit (Policy.Decide, Reserve,
// Refund and the sliding log), with the nanosecond replaced by the
// microsecond: for instants and periods that are whole microseconds the
// decisions are the same, and the times (RetryAfter, ResetAfter, Delay) are
// the same rounded up to the microsecond. Each formula is documented once, in
// package ratelimit; the functions here carry its name.
//
// A call decides a batch of requests, one KEYS entry each:
//
//	ARGV[1]            the time in µs, or -1 to read the server's TIME
//	ARGV[2]            the least expiry of a written key, in ms
//	ARGV[3]            the store's LegacyState L (0, 1 or 2)
//	ARGV[4..]          per request, fieldsPerRequest values:
//	                   alg, period µs, burst, r, p, cap, op, n, shadow,
//	                   maxWait µs (-1: none), mark A, mark B
//
// With N requests, KEYS[1..N] are their keys and, when L > 0, KEYS[N+i]
// the key of request i's text state of earlier versions: read where
// KEYS[i] has no state, and with L = 2 (LegacyShare) decided and written
// back there, as text (see LegacyState and the lean scripts' leanRead).
// It returns {now, refused, then per request: allowed, remaining, retry µs,
// reset µs, delay µs, mark A, mark B}. Requests are decided in order, each
// against the state the ones before it left (kept in the table pending);
// only if none that may refuse the batch refused are the states written, each
// with a PEXPIRE of its reset time, so idle keys disappear.
const luaPrelude = `
local function fdm(a, b)
  local q = math.floor(a / b)
  local r = a - q * b
  if r < 0 then q = q - 1; r = r + b elseif r >= b then q = q + 1; r = r - b end
  return q, r
end
local function cdiv(a, b)
  local q, r = fdm(a, b)
  if r > 0 then q = q + 1 end
  return q
end
local function later(lag, x) -- a wait measured from the caller's time (keyTime)
  if x > 0 then return x + lag end
  return x
end
local function num(s) return tonumber(s) end
local function str(x) return string.format('%.0f', x) end
local function loadText(k) -- the text state of earlier versions: "a b" or "a b c"
  local v = redis.call('GET', k)
  if not v then return nil end
  local s = {}
  for x in string.gmatch(v, '%S+') do s[#s + 1] = num(x) end
  return s
end
local function saveText(s)
  local t = {}
  for i, x in ipairs(s) do t[i] = str(x) end
  return table.concat(t, ' ')
end
local ALG = {}
`

// luaFixedWindow is ratelimit's fixedWindow.
const luaFixedWindow = `
ALG[1] = {
  load = function(k) local v = redis.call('GET', k); if not v then return nil end
    local a, b = struct.unpack('<dd', v); return {a, b} end,
  save = function(k, s) return struct.pack('<dd', s[1], s[2]) end,
  take = function(q, s, now, n)
    local P, b = q.P, q.b
    local lag = 0
    if s and s[1] * P > now then lag = s[1] * P - now; now = s[1] * P end -- keyTime
    local w, e = fdm(now, P)
    local toEnd = P - e
    local c = 0
    if s and s[1] == w then c = s[2] end
    if n > b - c then return s, false, b - c, toEnd + lag, toEnd + lag end
    c = c + n
    if c == 0 then return nil, true, b, 0, 0 end
    return {w, c}, true, b - c, 0, toEnd + lag
  end,
}
`

// luaSlidingWindow is ratelimit's slidingWindow.
const luaSlidingWindow = `
ALG[3] = {
  load = function(k) local v = redis.call('GET', k); if not v then return nil end
    local a, b, c = struct.unpack('<ddd', v); return {a, b, c} end,
  save = function(k, s) return struct.pack('<ddd', s[1], s[2], s[3]) end,
  take = function(q, s, now, n)
    local P, b = q.P, q.b
    local lag = 0
    if s and s[1] * P > now then lag = s[1] * P - now; now = s[1] * P end -- keyTime
    local w, e = fdm(now, P)
    local prev, curr = 0, 0
    if s then
      if s[1] == w then prev, curr = s[2], s[3] elseif s[1] == w - 1 then prev = s[3] end
    end
    local weight = cdiv(prev * (P - e), P)
    if curr + n + weight > b then
      local reset = P - e
      if curr > 0 then reset = 2 * P - e end
      local a = b - curr - n
      if a >= 0 then
        local k = fdm(a * P, prev)
        if k > 0 then return s, false, math.max(0, b - curr - weight), P - k - e + lag, reset + lag end
      end
      local x = 0
      a = b - n
      if curr > a then x = P - fdm(a * P, curr) end
      return s, false, math.max(0, b - curr - weight), P - e + x + lag, reset + lag
    end
    curr = curr + n
    local rem = b - curr - weight
    if curr > 0 then return {w, prev, curr}, true, rem, 0, 2 * P - e + lag end
    if prev > 0 then return {w, prev, curr}, true, rem, 0, P - e + lag end
    return nil, true, rem, 0, 0
  end,
}
`

// luaBuckets is ratelimit's bucket, deficit, fromDeficit, reserve and
// refund, for TokenBucket (4) and GCRA (5).
const luaBuckets = `
local MAXUNITS = 4503599627370496
local function bucketAlg(gcra)
  local B = {}
  B.load = function(k) local v = redis.call('GET', k); if not v then return nil end
    local a, b = struct.unpack('<dd', v); return {a, b} end
  B.save = function(k, s) return struct.pack('<dd', s[1], s[2]) end
  local function deficit(q, s, now)
    if not s then return 0 end
    if gcra then
      if s[1] < now then return 0 end
      return (s[1] - now) * q.r + s[2]
    end
    local d = s[1]
    if d <= 0 then return 0 end
    local el = now - s[2]
    if el <= 0 then return d end
    if el > fdm(d, q.r) then return 0 end
    return d - el * q.r
  end
  local function keyTime(s, now)
    if not gcra and s and s[1] > 0 and s[2] > now then return s[2] end
    return now
  end
  local function fromDeficit(q, d, now)
    if d <= 0 then return nil end
    if gcra then local w, f = fdm(d, q.r); return {now + w, f} end
    return {d, now}
  end
  B.take = function(q, s, now, n)
    local t = keyTime(s, now)
    local lag = t - now
    now = t
    local d = deficit(q, s, now)
    local need = d + n * q.p
    if need > q.cap then
      return s, false, fdm(math.max(0, q.cap - d), q.p), cdiv(need - q.cap, q.r) + lag, later(lag, cdiv(d, q.r))
    end
    return fromDeficit(q, need, now), true, fdm(q.cap - need, q.p), 0, later(lag, cdiv(need, q.r))
  end
  B.reserve = function(q, s, now, n, maxWait)
    local t = keyTime(s, now)
    local lag = t - now
    now = t
    local d = deficit(q, s, now)
    local need = d + n * q.p
    if need > MAXUNITS then return s, false, cdiv(need - q.cap, q.r) + lag, 0, 0 end
    local delay = 0
    if need > q.cap then delay = cdiv(need - q.cap, q.r) + lag end
    if maxWait >= 0 and delay > maxWait then return s, false, delay, 0, 0 end
    return fromDeficit(q, need, now), true, delay, need, now
  end
  B.refund = function(q, s, now, n, mA, mB)
    now = keyTime(s, now)
    if mA <= q.cap then return s end
    local el = math.max(0, now - mB)
    if el >= cdiv(mA - q.cap, q.r) then return s end
    local md = mA - el * q.r
    local d = deficit(q, s, now)
    local give = n * q.p - math.max(0, d - md)
    if give <= 0 then return s end
    return fromDeficit(q, d - give, now)
  end
  return B
end
ALG[4] = bucketAlg(false)
ALG[5] = bucketAlg(true)
`

// luaSlidingLog is ratelimit's slidingLog on a sorted set whose scores are
// the instants (µs) of the admitted units. A unit admitted at t is the
// member "t:i", i counting the units of the log at t; the driver adds them
// with ZADD NX and takes the next i for one already there (possible only if
// the clock went back), so every admitted unit is its own member.
const luaSlidingLog = `
ALG[2] = { log = true }
`

// luaDriver decides the batch. Sliding logs are counted with the units the
// batch itself adds (pending[k].add) and written at the end like the rest.
const luaDriver = `
local now = num(ARGV[1])
if now < 0 then local t = redis.call('TIME'); now = num(t[1]) * 1000000 + num(t[2]) end
local minTTL, L = num(ARGV[2]), num(ARGV[3])
local F = 12
local N = (#ARGV - 3) / F
local pending, order, out, undo = {}, {}, {now, 0}, {}
local refused = false
local function logAt(pk, k, j) -- the j-th oldest stamp (0-based) in a log's window
  if j >= pk.c then return pk.t end
  return num(redis.call('ZRANGE', k, pk.old + j, pk.old + j, 'WITHSCORES')[2])
end
local function logState(pk, k, add) -- remaining and reset of a log holding add pending units
  local c = pk.c + add
  local reset = 0
  if c > 0 then reset = logAt(pk, k, c - 1) + pk.q.P - now end
  return pk.q.b - c, reset
end
for i = 1, N do
  local k = KEYS[i]
  local o = 3 + (i - 1) * F
  local alg = num(ARGV[o + 1])
  local q = {P = num(ARGV[o + 2]), b = num(ARGV[o + 3]), r = num(ARGV[o + 4]), p = num(ARGV[o + 5]), cap = num(ARGV[o + 6])}
  local op, n, shadow, maxWait = num(ARGV[o + 7]), num(ARGV[o + 8]), ARGV[o + 9] == '1', num(ARGV[o + 10])
  local A = ALG[alg]
  local pk = pending[k]
  if not pk then
    pk = {alg = A, q = q}
    if A.log then
      -- Decided at logTime: now, or the newest stamp if later. The pk.old
      -- oldest stamps, out of its window, are dropped only if all are or
      -- when units are admitted (see slidingLog); pk.c are in the window.
      local top = redis.call('ZRANGE', k, -1, -1, 'WITHSCORES')
      pk.t, pk.old, pk.c, pk.add = now, 0, 0, 0
      if top[2] then
        if num(top[2]) > now then pk.t = num(top[2]) end
        pk.cut = str(pk.t - q.P)
        pk.old = redis.call('ZCOUNT', k, '-inf', pk.cut)
        pk.c = redis.call('ZCARD', k) - pk.old
        if pk.c == 0 then redis.call('DEL', k); pk.old = 0 end
      end
    else
      pk.s, pk.k = A.load(k), k
      if not pk.s and L > 0 then
        pk.s = loadText(KEYS[N + i])
        if L == 2 then pk.k, pk.text = KEYS[N + i], true end
      end
    end
    pending[k] = pk
    table.insert(order, k)
  end
  local allowed, rem, retry, reset, delay, mA, mB = false, 0, 0, 0, 0, 0, 0
  local u = {k = k, pk = pk, s = pk.s, add = pk.add}
  if A.log then
    local b, P = q.b, q.P
    local c = pk.c + pk.add
    if c + n > b then
      rem, retry, reset = b - c, logAt(pk, k, c + n - b - 1) + P - now, logAt(pk, k, c - 1) + P - now
    else
      allowed = true
      if n > 0 and pk.old > 0 then redis.call('ZREMRANGEBYSCORE', k, '-inf', pk.cut); pk.old = 0 end
      pk.add = pk.add + n
      rem, reset = logState(pk, k, pk.add)
      if n > 0 then undo[i] = u end
    end
  elseif op == 0 then
    local s
    s, allowed, rem, retry, reset = A.take(q, pk.s, now, n)
    if allowed then pk.s, pk.reset, pk.dirty = s, reset, true; undo[i] = u end
  elseif op == 1 then
    local s, ok, _
    s, ok, delay, mA, mB = A.reserve(q, pk.s, now, n, maxWait)
    _, _, rem, retry, reset = A.take(q, s, now, 0)
    allowed = ok
    if ok then pk.s, pk.reset, pk.dirty = s, reset, true; undo[i] = u end
  else
    local s = A.refund(q, pk.s, now, n, num(ARGV[o + 11]), num(ARGV[o + 12]))
    local full
    full, allowed, rem, retry, reset = A.take(q, s, now, 0)
    if allowed and full == nil then s = nil end -- back to a fresh key's state: DEL
    pk.s, pk.reset, pk.dirty = s, reset, true
    undo[i] = u
  end
  if not allowed and (op == 1 or (op == 0 and not shadow)) then refused = true end
  for _, v in ipairs({allowed and 1 or 0, rem, retry, reset, delay, mA, mB}) do table.insert(out, v) end
end
if refused then
  -- Nothing is written. A request that changed its key reports the
  -- state it found instead, keeping its verdict.
  out[2] = 1
  for i, u in pairs(undo) do
    local j = 2 + (i - 1) * 7
    if u.pk.alg.log then
      out[j + 2], out[j + 4] = logState(u.pk, u.k, u.add)
      out[j + 3] = 0
    else
      local _
      _, _, out[j + 2], out[j + 3], out[j + 4] = u.pk.alg.take(u.pk.q, u.s, now, 0)
    end
  end
  return out
end
for _, k in ipairs(order) do
  local pk = pending[k]
  if pk.alg.log then
    if pk.add > 0 then
      -- Members "now:i", i past the log's count, added NX in chunks (unpack
      -- takes at most a few thousand values); a member already there (the
      -- clock went back) is skipped and another index taken, so every unit
      -- admitted is one member.
      local t, i, added = str(pk.t), pk.c, 0
      while added < pk.add do
        local args = {'NX'}
        for _ = 1, math.min(pk.add - added, 1000) do
          i = i + 1
          args[#args + 1] = t
          args[#args + 1] = t .. ':' .. i
        end
        added = added + redis.call('ZADD', k, unpack(args))
      end
      redis.call('PEXPIRE', k, str(math.max(minTTL, math.floor((pk.t - now + pk.q.P) / 1000) + 1)))
    end
  elseif pk.dirty then
    local v
    if pk.text and pk.s then v = saveText(pk.s) elseif pk.s then v = pk.alg.save(k, pk.s) end
    if v == nil then
      redis.call('DEL', pk.k)
    else
      redis.call('SET', pk.k, v, 'PX', str(math.max(minTTL, math.floor(pk.reset / 1000) + 1)))
    end
  end
end
return out
`

// fieldsPerRequest is the number of ARGV entries per request.
const fieldsPerRequest = 12

// algSource is each algorithm's Lua.
var algSource = map[ratelimit.Algorithm]string{
	ratelimit.FixedWindow:   luaFixedWindow,
	ratelimit.SlidingLog:    luaSlidingLog,
	ratelimit.SlidingWindow: luaSlidingWindow,
	ratelimit.TokenBucket:   luaBuckets,
	ratelimit.GCRA:          luaBuckets,
}

// scriptFor returns the script of one algorithm (for single requests, the
// hot path) or, with alg 0, of all five (for batches mixing algorithms).
func scriptFor(alg ratelimit.Algorithm) *redis.Script {
	var b strings.Builder
	b.WriteString(luaPrelude)
	if alg != 0 {
		b.WriteString(algSource[alg])
	} else {
		b.WriteString(luaFixedWindow + luaSlidingLog + luaSlidingWindow + luaBuckets)
	}
	b.WriteString(luaDriver)
	return redis.NewScript(b.String())
}
