package interceptors

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/ratelimit"
)

// The legacy fields follow the tightest tier: the refusing one, else the
// one with the fewest units left; they are absent without the option and
// when no tier read the caller's state.
func TestLegacyHeaders(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 2, 3, 4, 0, 500_000_000, time.UTC)) // half a second past: Reset rounds up
	perIP, err := ratelimit.New(ratelimit.FixedWindow, ratelimit.Limit{Rate: 5, Period: time.Minute}, ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	perKey, err := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 1, Period: 10 * time.Second, Burst: 3}, ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	key := func(r *http.Request) (string, error) { return r.Header.Get("X-Key"), nil }
	ip := func(*http.Request) (string, error) { return "ip:1", nil }
	quotas := []HTTPQuota{{Name: "per-ip", Limiter: perIP, Key: ip}, {Name: "per-key", Limiter: perKey, Key: key}}
	mw, err := RateLimitMiddleware(quotas, WithLegacyHeaders(true), WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	do := func(k string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Key", k)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	epoch := clk.Now().Unix() // 03:04:00, the half second dropped
	tests := []struct {
		key                     string
		code                    int
		limit, remaining, reset string
	}{
		// per-key has 2 of 3 left, per-ip 4 of 5: per-key is the tightest;
		// its bucket is full again in 10 s, from 03:04:00.5: 03:04:11.
		{"a", 200, "3", "2", itoa(epoch + 11)},
		{"b", 200, "3", "2", itoa(epoch + 11)}, // per-ip 3 left, per-key b 2: b's bucket
		{"a", 200, "3", "1", itoa(epoch + 21)}, // per-ip 2, per-key a 1
		{"a", 200, "3", "0", itoa(epoch + 31)}, // per-ip 1, per-key a 0
		{"c", 200, "5", "0", itoa(epoch + 60)}, // per-ip 0, per-key c 2: per-ip's window ends at 03:05:00
		{"c", 429, "5", "0", itoa(epoch + 60)}, // refused by per-ip: its retry time
	}
	for i, tt := range tests {
		w := do(tt.key)
		got := []string{w.Header().Get(LegacyLimitHeader), w.Header().Get(LegacyRemainingHeader), w.Header().Get(LegacyResetHeader)}
		if w.Code != tt.code || strings.Join(got, " ") != strings.Join([]string{tt.limit, tt.remaining, tt.reset}, " ") {
			t.Errorf("request %d (key %s): %d %q, want %d [%s %s %s] (RateLimit: %s)", i, tt.key, w.Code, got, tt.code,
				tt.limit, tt.remaining, tt.reset, w.Header().Get(RateLimitHeader))
		}
	}

	mw, err = RateLimitMiddleware(quotas)
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	for _, name := range []string{LegacyLimitHeader, LegacyRemainingHeader, LegacyResetHeader} {
		if v := w.Header().Get(name); v != "" {
			t.Errorf("without WithLegacyHeaders: %s: %s", name, v)
		}
	}
	mdKey, err := MetadataKey("x-key")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RateLimitInterceptors([]GRPCQuota{{Name: "q", Limiter: perIP, Key: mdKey}}, ServerOption(WithLegacyHeaders(true))); err == nil {
		t.Error("the gRPC interceptors accepted WithLegacyHeaders, an HTTP option, converted to a ServerOption")
	}
}

// A decision that did not read the caller's state (a failed store's
// fail-open policy) has no legacy fields, as it has no RateLimit member.
func TestLegacyFieldsOnlyFromTheCallersState(t *testing.T) {
	now := time.Unix(100, 0)
	if _, _, _, ok := srvLegacyFields(now, []int64{5}, []ratelimit.Result{{Allowed: true, Source: ratelimit.SourceFailOpen}}); ok {
		t.Error("fields from a fail-open decision")
	}
	l, rem, reset, ok := srvLegacyFields(now, []int64{5, 9}, []ratelimit.Result{
		{Allowed: true, Source: ratelimit.SourceFailOpen, Remaining: 0},
		{Allowed: true, Source: ratelimit.SourceFailLocal, Remaining: 4, ResetAfter: 1500 * time.Millisecond},
	})
	if !ok || l != "9" || rem != "4" || reset != "102" {
		t.Errorf("got %s %s %s %v, want 9 4 102 true", l, rem, reset, ok)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
