local now = tonumber(ARGV[1])
if now < 0 then local t = redis.call('TIME'); now = tonumber(t[1]) * 1000000 + tonumber(t[2]) end
local minTTL, P, b, n = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[8])
local function fdm(a, c)
  local q = math.floor(a / c)
  local m = a - q * c
  if m < 0 then q = q - 1; m = m + c elseif m >= c then q = q + 1; m = m - c end
  return q, m
end
local k = KEYS[1]
local v = redis.call('GET', k)
