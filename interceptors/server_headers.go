package interceptors

import (
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// The names of the IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers,
// named-policy syntax, drafts -08 to -11) and of the retry fields.
const (
	// RateLimitPolicyHeader lists the quota policies of a route, one
	// structured-field List member per tier: "name";q=QUOTA;w=WINDOW.
	RateLimitPolicyHeader = "RateLimit-Policy"
	// RateLimitHeader reports each policy's state after the request:
	// "name";r=REMAINING;t=SECONDS.
	RateLimitHeader = "RateLimit"
	// RetryAfterHeader is the HTTP Retry-After field, sent in whole seconds.
	RetryAfterHeader = "Retry-After"
	// RetryPushbackTrailer is the gRPC trailer with the retry time in
	// milliseconds (gRFC A6): the server interceptors send it with every
	// quota or overload refusal, and the client interceptors, like grpc-go
	// clients with a retry policy, honour it.
	RetryPushbackTrailer = "grpc-retry-pushback-ms"
)

// The names of the legacy rate-limit fields that WithLegacyHeaders adds,
// as GitHub, ulule/limiter and express-rate-limit send them.
const (
	// LegacyLimitHeader is the quota of the tightest tier (its q).
	LegacyLimitHeader = "X-RateLimit-Limit"
	// LegacyRemainingHeader is the units that tier has left.
	LegacyRemainingHeader = "X-RateLimit-Remaining"
	// LegacyResetHeader is when that tier can be counted on again, in Unix
	// seconds (rounded up): its retry time if it refused, else the time it
	// is back to its full quota.
	LegacyResetHeader = "X-RateLimit-Reset"
)

// srvMaxSFInt is the largest structured-field Integer (RFC 9651 §3.3.1).
const srvMaxSFInt = 999_999_999_999_999

// ceilDiv returns d in whole units, rounded up, so that a client that
// waits that long never comes back early; negative durations give 0.
func ceilDiv(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	n := int64(d / unit)
	if d%unit != 0 {
		n++
	}
	return n
}

// srvCeilSeconds returns d in whole seconds, rounded up (see ceilDiv),
// capped at the largest structured-field integer.
func srvCeilSeconds(d time.Duration) int64 {
	return min(ceilDiv(d, time.Second), srvMaxSFInt)
}

// srvCeilMillis returns d in whole milliseconds, rounded up; negative gives 0.
func srvCeilMillis(d time.Duration) int64 { return ceilDiv(d, time.Millisecond) }

// srvRetry returns the retry time to send for a refusal whose true retry
// time is d: d plus a uniform jitter in [0, c.jitter], never less than d,
// and never zero (a refused client must not retry at once).
func (c *srvConfig) srvRetry(d time.Duration) time.Duration {
	if d < time.Millisecond {
		d = time.Millisecond
	}
	if c.jitter > 0 {
		u := c.uniform()
		if u > 0 && u < 1 {
			add := time.Duration(u * float64(c.jitter))
			if d+add > d { // no overflow
				d += add
			}
		}
	}
	return d
}

// srvShedRetry returns the retry time to send when the shedder refuses:
// its hint, else WithOverloadRetry's time, through srvRetry.
func (c *srvConfig) srvShedRetry(dec shed.Decision) time.Duration {
	if dec.RetryAfter > 0 {
		return c.srvRetry(dec.RetryAfter)
	}
	return c.srvRetry(c.overloadRetry)
}

// seededUniform returns a source of uniform numbers in [0, 1) seeded with
// seed and safe for concurrent use. Both halves draw their jitter from a
// func() float64 field named uniform: the client's is seededUniform(WithClientSeed),
// the server's math/rand/v2's Float64 unless WithJitterSource replaces it.
func seededUniform(seed uint64) func() float64 {
	var mu sync.Mutex
	rnd := rand.New(rand.NewPCG(seed, 0xc11e))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return rnd.Float64()
	}
}

// srvRetryAfterValue formats a retry time as Retry-After delay-seconds,
// rounded up and at least 1.
func srvRetryAfterValue(d time.Duration) string {
	return strconv.FormatInt(max(1, srvCeilSeconds(d)), 10)
}

// srvPolicyMember is one quota policy as advertised in RateLimit-Policy.
type srvPolicyMember struct {
	name   string
	quota  int64 // q
	window int64 // w, seconds
}

// srvPolicyOf returns the advertised quota and window of a limiter: q is the
// most units the key is granted at once (Burst; Rate for the window
// algorithms) and w the time, in whole seconds rounded up, in which the limit
// grants that many again (Burst·Period/Rate). Rounding w up keeps the
// advertisement conservative: in any w-second interval a client that spends
// at most q units is never refused, except by SlidingWindow, whose weighted
// estimate of the previous window can count units that were spent before
// the interval began.
func srvPolicyOf(name string, lim *ratelimit.Limiter) srvPolicyMember {
	l := lim.Policy().Limit()
	num := new(big.Int).Mul(big.NewInt(int64(l.Burst)), big.NewInt(int64(l.Period)))
	den := new(big.Int).Mul(big.NewInt(int64(l.Rate)), big.NewInt(int64(time.Second)))
	w, rem := new(big.Int).QuoRem(num, den, new(big.Int))
	if rem.Sign() != 0 {
		w.Add(w, big.NewInt(1))
	}
	win := int64(srvMaxSFInt)
	if w.IsInt64() {
		win = min(max(w.Int64(), 1), srvMaxSFInt)
	}
	return srvPolicyMember{name: name, quota: min(int64(l.Burst), srvMaxSFInt), window: win}
}

// srvValidPolicyName reports whether name can be a policy name: a non-empty
// structured-field String (printable ASCII) of at most 64 bytes.
func srvValidPolicyName(name string) error {
	if name == "" {
		return errors.New("empty policy name")
	}
	if len(name) > 64 {
		return fmt.Errorf("policy name %.20q... longer than 64 bytes", name)
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 || name[i] > 0x7e {
			return fmt.Errorf("policy name %q is not printable ASCII", name)
		}
	}
	return nil
}

// srvPolicyField serialises the RateLimit-Policy field for members with
// httpsfv: a List of Strings with parameters q and w.
func srvPolicyField(members []srvPolicyMember) (string, error) {
	list := make(httpsfv.List, 0, len(members))
	for _, m := range members {
		it := httpsfv.NewItem(m.name)
		it.Params.Add("q", m.quota)
		it.Params.Add("w", m.window)
		list = append(list, it)
	}
	return httpsfv.Marshal(list)
}

// srvRateLimitField serialises the RateLimit field: for tier i, if its
// decision read the key's state (srvKnown), the named policy with r, the
// units remaining, and t, the whole seconds (rounded up) after which the
// client can count on quota again: the retry time if the tier refused, else
// the time until the key is back to its full quota.
// names[i] is tier i's name already serialised as a structured-field String
// (by httpsfv, at construction); the integers are appended here so that the
// field of every response costs one allocation. The result is exactly what
// httpsfv.Marshal produces for the same List (TestRateLimitFieldMatchesHTTPSFV).
func srvRateLimitField(buf []byte, names []string, each []ratelimit.Result) []byte {
	first := true
	for i, res := range each {
		if !srvKnown(res) {
			continue // no numbers of the key's own to report
		}
		if !first {
			buf = append(buf, ", "...)
		}
		first = false
		buf = append(buf, names[i]...)
		buf = append(buf, ";r="...)
		buf = strconv.AppendInt(buf, min(int64(max(res.Remaining, 0)), srvMaxSFInt), 10)
		buf = append(buf, ";t="...)
		t := res.ResetAfter
		if !res.Allowed {
			t = res.RetryAfter
		}
		buf = strconv.AppendInt(buf, srvCeilSeconds(t), 10)
	}
	return buf
}

// srvSFString serialises s as a structured-field String with httpsfv.
func srvSFString(s string) (string, error) {
	return httpsfv.Marshal(httpsfv.NewItem(s))
}

// srvLegacyFields returns the X-RateLimit-Limit, -Remaining and -Reset
// values for a decided request: of the tiers whose decision read the key's
// state, a refusing one if any, else the one with the fewest units left
// (ties: the first). ok is false when no tier has numbers of the key's own.
func srvLegacyFields(now time.Time, quota []int64, each []ratelimit.Result) (limit, remaining, reset string, ok bool) {
	best := -1
	for i, r := range each {
		if !srvKnown(r) {
			continue
		}
		switch {
		case best < 0,
			!r.Allowed && each[best].Allowed,
			r.Allowed == each[best].Allowed && r.Remaining < each[best].Remaining:
			best = i
		}
	}
	if best < 0 {
		return "", "", "", false
	}
	r := each[best]
	t := r.ResetAfter
	if !r.Allowed {
		t = r.RetryAfter
	}
	at := now.Add(max(t, 0))
	sec := at.Unix()
	if at.Nanosecond() > 0 {
		sec++ // rounded up: a client that waits until then is never early
	}
	return strconv.FormatInt(quota[best], 10), strconv.FormatInt(int64(max(r.Remaining, 0)), 10), strconv.FormatInt(sec, 10), true
}
