local sw, c, lag = nil, 0, 0
if v then
  local sp = string.find(v, ' ', 1, true)
  sw = tonumber(string.sub(v, 1, sp - 1))
  if sw * P > now then lag = sw * P - now; now = sw * P end -- keyTime
  c = tonumber(string.sub(v, sp + 1))
end
local w, e = fdm(now, P)
local toEnd = P - e + lag
if sw ~= w then c = 0 end
if n > b - c then return {0, b - c, toEnd, toEnd} end
c = c + n
if c == 0 then
  if v then redis.call('DEL', k) end
  return {1, b, 0, 0}
end
redis.call('SET', k, string.format('%.0f %.0f', w, c), 'PX', string.format('%.0f', math.max(minTTL, math.floor(toEnd / 1000) + 1)))
return {1, b - c, 0, toEnd}
