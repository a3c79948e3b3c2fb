package interceptors

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/ratelimit"
)

// BenchmarkHTTPAdmit measures the admit path of the middleware, called
// directly (no network), with a writer that keeps nothing.
func BenchmarkHTTPAdmit(b *testing.B) {
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 1 << 30, Period: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	h, err := HeaderKey("X-Tenant")
	if err != nil {
		b.Fatal(err)
	}
	rl, err := RateLimitMiddleware([]HTTPQuota{{"tenant", lim, h}})
	if err != nil {
		b.Fatal(err)
	}
	gate, err := adaptive.New(adaptive.Fixed(1 << 20))
	if err != nil {
		b.Fatal(err)
	}
	g, err := GateMiddleware(gate)
	if err != nil {
		b.Fatal(err)
	}
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{{"ratelimit", rl(noop)}, {"gate", g(noop)}, {"ratelimit+gate", rl(g(noop))}} {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/", nil)
			req.Header.Set("X-Tenant", "acme")
			w := &srvNopWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				bc.h.ServeHTTP(w, req)
			}
		})
	}
}
