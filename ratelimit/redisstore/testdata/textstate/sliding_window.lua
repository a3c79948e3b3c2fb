local prev, curr, lag = 0, 0, 0
local w, e
if v then
  local s1 = string.find(v, ' ', 1, true)
  local s2 = string.find(v, ' ', s1 + 1, true)
  local sw = tonumber(string.sub(v, 1, s1 - 1))
  if sw * P > now then lag = sw * P - now; now = sw * P end -- keyTime
  w, e = fdm(now, P)
  if sw == w then prev, curr = tonumber(string.sub(v, s1 + 1, s2 - 1)), tonumber(string.sub(v, s2 + 1))
  elseif sw == w - 1 then prev = tonumber(string.sub(v, s2 + 1)) end
else
  w, e = fdm(now, P)
end
local weight, m = fdm(prev * (P - e), P)
if m > 0 then weight = weight + 1 end
if curr + n + weight > b then
  local reset = P - e + lag
  if curr > 0 then reset = 2 * P - e + lag end
  local rem = math.max(0, b - curr - weight)
  local a = b - curr - n
  if a >= 0 then
    local kk = fdm(a * P, prev)
    if kk > 0 then return {0, rem, P - kk - e + lag, reset} end
  end
  local x = 0
  a = b - n
  if curr > a then x = P - fdm(a * P, curr) end
  return {0, rem, P - e + x + lag, reset}
end
curr = curr + n
local rem = b - curr - weight
local reset = 0
if curr > 0 then reset = 2 * P - e + lag elseif prev > 0 then reset = P - e + lag end
if reset == 0 then
  if v then redis.call('DEL', k) end
  return {1, rem, 0, 0}
end
redis.call('SET', k, string.format('%.0f %.0f %.0f', w, prev, curr), 'PX', string.format('%.0f', math.max(minTTL, math.floor(reset / 1000) + 1)))
return {1, rem, 0, reset}
