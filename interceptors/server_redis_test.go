package interceptors

import (
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// srvLastDecision remembers whether the limiter's last decision was made by
// a failed store's failure policy.
type srvLastDecision struct {
	metrics.RateBase
	degraded atomic.Bool
}

func (o *srvLastDecision) RateDecision(_ string, d metrics.RateDecision) {
	o.degraded.Store(d.Degraded)
}

// TestRedisDownOnTheWire runs a rate limit on a real redis-server behind the
// real HTTP middleware and a real grpc-go client, stops the server, and
// starts it again, for each failure policy of the store. With Redis gone:
// FailClosed is 503 (temporary reduced capacity, Retry-After, no RateLimit
// numbers) and UNAVAILABLE (RetryInfo, pushback), never a quota refusal;
// FailOpen is admitted without a RateLimit field; FailLocal is admitted
// with the local copy's honest numbers. After the restart decisions come
// from Redis again. The store's timeout is 10s, so only failing fast on the
// refused connection can keep the decisions quick; their latencies through
// the wire, and the time back on Redis after the restart, are logged, and
// only generous bounds are asserted.
func TestRedisDownOnTheWire(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a redis-server")
	}
	srv := redistest.Start(t)
	for _, tc := range []struct {
		policy redisstore.FailurePolicy
		status int
		code   codes.Code
		rl     string // the RateLimit field with Redis down
	}{
		{redisstore.FailClosed, 503, codes.Unavailable, ""},
		{redisstore.FailOpen, 200, codes.OK, ""},
		{redisstore.FailLocal, 200, codes.OK, `"per-client";r=99999;t=1`},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			// go-redis's defaults otherwise: its dial and command retries are
			// what used to hold a decision until the timeout.
			client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
			t.Cleanup(func() { client.Close() })
			store, err := redisstore.New(client, redisstore.WithFailurePolicy(tc.policy), redisstore.WithTimeout(10*time.Second),
				redisstore.WithBreaker(5, 100*time.Millisecond), redisstore.WithPrefix(tc.policy.String()+":"))
			if err != nil {
				t.Fatal(err)
			}
			obs := &srvLastDecision{}
			lim, err := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 100000, Period: time.Minute},
				ratelimit.WithStore(store), ratelimit.WithObserver(obs))
			if err != nil {
				t.Fatal(err)
			}
			mw, err := RateLimitMiddleware([]HTTPQuota{{Name: "per-client", Limiter: lim, Key: func(*http.Request) (string, error) { return "client", nil }}})
			if err != nil {
				t.Fatal(err)
			}
			url := srvServe(t, mw(srvOK)).URL
			ics, err := RateLimitInterceptors([]GRPCQuota{{Name: "per-method", Limiter: lim, Key: MethodKey}})
			if err != nil {
				t.Fatal(err)
			}
			c := srvStartGRPC(t, &srvHealth{}, ics)

			resp, body := srvGet(t, url)
			if resp.StatusCode != 200 || resp.Header.Get(RateLimitHeader) != `"per-client";r=99999;t=1` || obs.degraded.Load() {
				t.Fatalf("Redis up: %d RateLimit %q (%s)", resp.StatusCode, resp.Header.Get(RateLimitHeader), body)
			}
			if _, err := c.Check(srvCtx(t), &grpc_health_v1.HealthCheckRequest{}); err != nil {
				t.Fatalf("Redis up: gRPC %v", err)
			}

			srv.Kill()
			var lat []time.Duration
			for i := range 20 {
				start := time.Now()
				resp, body := srvGet(t, url)
				lat = append(lat, time.Since(start))
				if resp.StatusCode != tc.status || !obs.degraded.Load() {
					t.Fatalf("Redis down, request %d: %d (%s), degraded %v; want %d", i, resp.StatusCode, body, obs.degraded.Load(), tc.status)
				}
				if tc.policy != redisstore.FailLocal || i == 0 {
					if got := resp.Header.Get(RateLimitHeader); got != tc.rl {
						t.Fatalf("Redis down, request %d: RateLimit %q, want %q", i, got, tc.rl)
					}
				}
				if resp.Header.Get(RateLimitPolicyHeader) == "" {
					t.Fatal("no RateLimit-Policy")
				}
				if tc.status == 503 {
					if ra := resp.Header.Get(RetryAfterHeader); ra != "1" {
						t.Fatalf("Retry-After %q, want 1 (the 100ms cool-down, rounded up)", ra)
					}
					if p := srvProblem(t, resp, body); p.Type != ProblemReducedCapacity || len(p.ViolatedPolicies) != 0 {
						t.Fatalf("problem %+v, want temporary reduced capacity", p)
					}
				}
				var trailer metadata.MD
				start = time.Now()
				_, err := c.Check(srvCtx(t), &grpc_health_v1.HealthCheckRequest{}, grpc.Trailer(&trailer))
				lat = append(lat, time.Since(start))
				if status.Code(err) != tc.code {
					t.Fatalf("Redis down, RPC %d: %v, want %v", i, err, tc.code)
				}
				if tc.code == codes.Unavailable {
					if d := srvRetryInfo(t, err); d != 100*time.Millisecond {
						t.Fatalf("RetryInfo %v, want the 100ms cool-down", d)
					}
					if got := trailer.Get(RetryPushbackTrailer); len(got) != 1 || got[0] != "100" {
						t.Fatalf("pushback %q", got)
					}
				}
			}
			first := lat[0]
			slices.Sort(lat)
			t.Logf("%v: with Redis down, the first request took %v; %d requests (HTTP and gRPC, through the wire): p50 %v, max %v",
				tc.policy, first, len(lat), lat[len(lat)/2], lat[len(lat)-1])
			if lat[len(lat)-1] > 5*time.Second { // half the store's timeout: generous slack, not a target
				t.Errorf("a request took %v with Redis refusing connections", lat[len(lat)-1])
			}

			srv.Restart()
			start := time.Now()
			for {
				resp, body := srvGet(t, url)
				if resp.StatusCode == 200 && !obs.degraded.Load() {
					if got := resp.Header.Get(RateLimitHeader); got != `"per-client";r=99999;t=1` { // Redis restarted empty
						t.Fatalf("back on Redis: RateLimit %q", got)
					}
					break
				}
				if time.Since(start) > 30*time.Second {
					t.Fatalf("not back on Redis 30s after the restart: %d %s", resp.StatusCode, body)
				}
				time.Sleep(time.Millisecond) // polling for the recovery, not timing it
			}
			t.Logf("%v: decisions back on Redis %v after the restart", tc.policy, time.Since(start))
			if _, err := c.Check(srvCtx(t), &grpc_health_v1.HealthCheckRequest{}); err != nil {
				t.Fatalf("back on Redis: gRPC %v", err)
			}
		})
	}
}

// TestRedisDownIssueRepro is the issue's repro: a client of a port nothing
// listens on, the store's defaults (FailClosed, 100ms), a token bucket of
// 100 a minute, one request through RateLimitMiddleware. It is 503 with
// Retry-After and the reduced-capacity problem, not a 429 blaming the
// client's quota; with FailOpen on the store it is admitted with no
// invented RateLimit numbers; with WithFailOpen(true) on the middleware it
// is admitted too.
func TestRedisDownIssueRepro(t *testing.T) {
	for _, tc := range []struct {
		storeOpen, mwOpen bool
		status            int
	}{{false, false, 503}, {true, false, 200}, {false, true, 200}} {
		t.Run(fmt.Sprintf("store-open=%v/middleware-open=%v", tc.storeOpen, tc.mwOpen), func(t *testing.T) {
			client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
			t.Cleanup(func() { client.Close() })
			var opts []redisstore.Option
			if tc.storeOpen {
				opts = append(opts, redisstore.WithFailurePolicy(redisstore.FailOpen))
			}
			store, err := redisstore.New(client, opts...)
			if err != nil {
				t.Fatal(err)
			}
			lim, err := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 100, Period: time.Minute}, ratelimit.WithStore(store))
			if err != nil {
				t.Fatal(err)
			}
			var mwOpts []RateLimitMiddlewareOption
			if tc.mwOpen {
				mwOpts = append(mwOpts, WithFailOpen(true))
			}
			mw, err := RateLimitMiddleware([]HTTPQuota{{Name: "per-ip", Limiter: lim, Key: func(*http.Request) (string, error) { return "ip", nil }}}, mwOpts...)
			if err != nil {
				t.Fatal(err)
			}
			resp, body := srvGet(t, srvServe(t, mw(srvOK)).URL)
			if resp.StatusCode != tc.status || resp.Header.Get(RateLimitHeader) != "" {
				t.Fatalf("%d RateLimit %q (%s), want %d and no RateLimit field", resp.StatusCode, resp.Header.Get(RateLimitHeader), body, tc.status)
			}
			if tc.status == 503 {
				p := srvProblem(t, resp, body)
				if p.Type != ProblemReducedCapacity || len(p.ViolatedPolicies) != 0 || resp.Header.Get(RetryAfterHeader) == "" {
					t.Fatalf("problem %+v Retry-After %q", p, resp.Header.Get(RetryAfterHeader))
				}
			}
		})
	}
}
