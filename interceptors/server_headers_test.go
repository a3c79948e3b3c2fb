package interceptors

import (
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/sluicehq/sluice/ratelimit"
)

func TestHeadersCeil(t *testing.T) {
	for _, tc := range []struct {
		d        time.Duration
		sec, ms  int64
		retryHdr string
	}{
		{-time.Second, 0, 0, "1"},
		{0, 0, 0, "1"},
		{1, 1, 1, "1"},
		{999 * time.Millisecond, 1, 999, "1"},
		{time.Second, 1, 1000, "1"},
		{time.Second + 1, 2, 1001, "2"},
		{59*time.Second + 500*time.Millisecond, 60, 59500, "60"},
		{1 << 62, 4611686019, 4611686018428, "4611686019"},
	} {
		if got := srvCeilSeconds(tc.d); got != tc.sec {
			t.Errorf("srvCeilSeconds(%v) = %d, want %d", tc.d, got, tc.sec)
		}
		if got := srvCeilMillis(tc.d); got != tc.ms {
			t.Errorf("srvCeilMillis(%v) = %d, want %d", tc.d, got, tc.ms)
		}
		if got := srvRetryAfterValue(tc.d); got != tc.retryHdr {
			t.Errorf("srvRetryAfterValue(%v) = %q, want %q", tc.d, got, tc.retryHdr)
		}
	}
}

func TestHeadersRetryJitterNeverEarlier(t *testing.T) {
	for _, u := range []float64{0, 0.25, 0.999999, 1, -1, 2} {
		c := &srvConfig{jitter: time.Second, uniform: func() float64 { return u }}
		for _, d := range []time.Duration{0, time.Nanosecond, 300 * time.Millisecond, time.Hour, 1<<63 - 1} {
			got := c.srvRetry(d)
			if lo := max(d, time.Millisecond); got < lo || got-lo > time.Second {
				t.Errorf("u=%v d=%v: retry %v", u, d, got)
			}
		}
	}
}

func TestHeadersPolicyOf(t *testing.T) {
	for _, tc := range []struct {
		alg     ratelimit.Algorithm
		lim     ratelimit.Limit
		q, w    int64
		comment string
	}{
		{ratelimit.FixedWindow, ratelimit.Limit{Rate: 100, Period: time.Minute}, 100, 60, "a window: q per w"},
		{ratelimit.SlidingWindow, ratelimit.Limit{Rate: 1000, Period: 24 * time.Hour}, 1000, 86400, "daily"},
		{ratelimit.TokenBucket, ratelimit.Limit{Rate: 100, Period: time.Second, Burst: 500}, 500, 5, "burst refilled in 5 s"},
		{ratelimit.GCRA, ratelimit.Limit{Rate: 3, Period: time.Second, Burst: 2}, 2, 1, "2/3 s rounded up"},
		{ratelimit.FixedWindow, ratelimit.Limit{Rate: 10, Period: 100 * time.Millisecond}, 10, 1, "sub-second window rounded up"},
		{ratelimit.GCRA, ratelimit.Limit{Rate: 1, Period: ratelimit.MaxPeriod}, 1, 1152921505, "huge period"},
	} {
		lim, err := ratelimit.New(tc.alg, tc.lim)
		if err != nil {
			t.Fatal(err)
		}
		m := srvPolicyOf("p", lim)
		if m.quota != tc.q || m.window != tc.w {
			t.Errorf("%s: q=%d w=%d, want q=%d w=%d", tc.comment, m.quota, m.window, tc.q, tc.w)
		}
	}
}

func TestHeadersPolicyFieldSyntax(t *testing.T) {
	got, err := srvPolicyField([]srvPolicyMember{{"burst", 100, 60}, {"daily", 1000, 86400}})
	if err != nil {
		t.Fatal(err)
	}
	// The draft's own example.
	if want := `"burst";q=100;w=60, "daily";q=1000;w=86400`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
}

// srvMarshalRateLimit is the RateLimit field built entirely by httpsfv, the
// reference srvRateLimitField must equal byte for byte.
func srvMarshalRateLimit(t testing.TB, names []string, each []ratelimit.Result) string {
	list := httpsfv.List{}
	for i, r := range each {
		it := httpsfv.NewItem(names[i])
		it.Params.Add("r", int64(max(r.Remaining, 0)))
		d := r.ResetAfter
		if !r.Allowed {
			d = r.RetryAfter
		}
		it.Params.Add("t", srvCeilSeconds(d))
		list = append(list, it)
	}
	s, err := httpsfv.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestHeadersRateLimitFieldMatchesHTTPSFV(t *testing.T) {
	names := []string{"default", `quote"and\backslash`, " spaced "}
	each := []ratelimit.Result{
		{Allowed: true, Source: ratelimit.SourceLimit, Limit: 10, Remaining: 9, ResetAfter: 1500 * time.Millisecond},
		{Allowed: false, Source: ratelimit.SourceLimit, Limit: 5, Remaining: 0, RetryAfter: 30 * time.Second, ResetAfter: time.Hour},
		{Allowed: true, Source: ratelimit.SourceFailLocal, Limit: 1, Remaining: 0},
	}
	sf := make([]string, len(names))
	for i, n := range names {
		var err error
		if sf[i], err = srvSFString(n); err != nil {
			t.Fatal(err)
		}
	}
	got := string(srvRateLimitField(nil, sf, each))
	want := srvMarshalRateLimit(t, names, each)
	if got != want {
		t.Errorf("srvRateLimitField = %q\nhttpsfv.Marshal   = %q", got, want)
	}
	if want := `"default";r=9;t=2, "quote\"and\\backslash";r=0;t=30, " spaced ";r=0;t=0`; got != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	// A quota decided without the key's state has no member: its numbers
	// would be invented.
	for _, src := range []ratelimit.Source{ratelimit.SourceFailOpen, ratelimit.SourceFailClosed, ratelimit.SourceFull} {
		each[1].Source = src
		got := string(srvRateLimitField(nil, sf, each))
		if want := `"default";r=9;t=2, " spaced ";r=0;t=0`; got != want {
			t.Errorf("%v: RateLimit %q, want %q", src, got, want)
		}
	}
}

// FuzzHeadersRateLimitField checks, for arbitrary policy names and
// numbers, that names the middleware accepts serialise to a RateLimit field
// identical to httpsfv's, that httpsfv parses back to the same values, and
// that names it refuses are refused at construction, never at request time.
func FuzzHeadersRateLimitField(f *testing.F) {
	f.Add("default", int64(50), int64(30_500_000_000), true)
	f.Add(`a"b\c`, int64(-1), int64(-5), false)
	f.Add("\x00", int64(1<<62), int64(1<<62), false)
	f.Fuzz(func(t *testing.T, name string, remaining, d int64, allowed bool) {
		if srvValidPolicyName(name) != nil {
			return
		}
		sf, err := srvSFString(name)
		if err != nil {
			t.Fatalf("valid name %q does not serialise: %v", name, err)
		}
		res := ratelimit.Result{Allowed: allowed, Source: ratelimit.SourceLimit, Limit: 1, Remaining: int(remaining)}
		if allowed {
			res.ResetAfter = time.Duration(d)
		} else {
			res.RetryAfter = time.Duration(d)
		}
		got := string(srvRateLimitField(nil, []string{sf, sf}, []ratelimit.Result{res, res}))
		if res.Remaining <= srvMaxSFInt {
			if want := srvMarshalRateLimit(t, []string{name, name}, []ratelimit.Result{res, res}); got != want {
				t.Fatalf("field %q, httpsfv %q", got, want)
			}
		}
		list, err := httpsfv.UnmarshalList([]string{got})
		if err != nil || len(list) != 2 {
			t.Fatalf("field %q does not parse: %v", got, err)
		}
		it := list[1].(httpsfv.Item)
		r, _ := it.Params.Get("r")
		tt, _ := it.Params.Get("t")
		if it.Value != name || r.(int64) != min(max(remaining, 0), srvMaxSFInt) || tt.(int64) != srvCeilSeconds(time.Duration(d)) {
			t.Fatalf("parsed %v %v %v from %q", it.Value, r, tt, got)
		}
	})
}
