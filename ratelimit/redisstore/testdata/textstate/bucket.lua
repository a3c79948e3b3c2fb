local r, per, cap = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local d, lag = 0, 0
if v then
  local sp = string.find(v, ' ', 1, true)
  local a, s = tonumber(string.sub(v, 1, sp - 1)), tonumber(string.sub(v, sp + 1))
  if GCRA then
    if a >= now then d = (a - now) * r + s end
  elseif a > 0 then
    if s > now then lag = s - now; now = s end -- keyTime
    local el = now - s
    if el <= 0 then d = a
    elseif el <= fdm(a, r) then d = a - el * r end
  end
end
local need = d + n * per
if need > cap then
  local q, m = fdm(need - cap, r)
  if m > 0 then q = q + 1 end
  local z, mz = fdm(d, r)
  if mz > 0 then z = z + 1 end
  if z > 0 then z = z + lag end
  return {0, fdm(math.max(0, cap - d), per), q + lag, z}
end
local reset, mr = fdm(need, r)
if mr > 0 then reset = reset + 1 end
if reset > 0 then reset = reset + lag end
if need <= 0 then
  if v then redis.call('DEL', k) end
  return {1, fdm(cap, per), 0, 0}
end
local st
if GCRA then
  local wq, wm = fdm(need, r)
  st = string.format('%.0f %.0f', now + wq, wm)
else
  st = string.format('%.0f %.0f', need, now)
end
redis.call('SET', k, st, 'PX', string.format('%.0f', math.max(minTTL, math.floor(reset / 1000) + 1)))
return {1, fdm(cap - need, per), 0, reset}
