package interceptors

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/shed"
)

// srvHeld runs n calls of serve concurrently, over several rounds; an
// admitted call calls in() and holds its slot until every call of the round
// has been decided. It returns how many were admitted per round.
func srvHeld(t *testing.T, c *clock.Manual, rounds, n int, serve func(in func(), release <-chan struct{}) bool) []int {
	t.Helper()
	var got []int
	for range rounds {
		release := make(chan struct{})
		decided := make(chan bool, n)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if !serve(func() { decided <- true }, release) {
					decided <- false
				}
			})
		}
		admitted := 0
		for range n {
			if <-decided {
				admitted++
			}
		}
		c.Advance(100 * time.Millisecond)
		close(release)
		wg.Wait()
		got = append(got, admitted)
	}
	return got
}

// TestShedDefaultsServeWhatTheGateServes: the README's wiring —
// shed.New(gate, shed.WithReserve(0.2)) behind ShedMiddleware or
// ShedInterceptors with no user or priority options — under 2x overload
// admits, round after round, what GateMiddleware alone admits: traffic of
// one priority is refused by the gate alone.
func TestShedDefaultsServeWhatTheGateServes(t *testing.T) {
	const limit, offered, rounds = 8, 16, 20
	newGate := func(c *clock.Manual) *adaptive.Limiter {
		g, err := adaptive.New(adaptive.Fixed(limit), adaptive.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	type serveFunc = func(in func(), release <-chan struct{}) bool
	httpServe := func(mw func(http.Handler) http.Handler) serveFunc {
		return func(in func(), release <-chan struct{}) bool {
			rec := httptest.NewRecorder()
			mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { in(); <-release })).
				ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			return rec.Code == http.StatusOK
		}
	}
	grpcServe := func(ic GRPCInterceptors) serveFunc {
		info := &grpc.UnaryServerInfo{FullMethod: "/example.Service/Method"}
		return func(in func(), release <-chan struct{}) bool {
			_, err := ic.Unary(context.Background(), nil, info, func(context.Context, any) (any, error) {
				in()
				<-release
				return "ok", nil
			})
			return status.Code(err) == 0
		}
	}
	for _, transport := range []string{"http", "grpc"} {
		c := clock.NewManual(time.Unix(0, 0))
		gate, shedGate := newGate(c), newGate(c)
		shedder, err := shed.New(shedGate, shed.WithReserve(0.2), shed.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		var alone, withShed serveFunc
		if transport == "http" {
			g, err := GateMiddleware(gate)
			if err != nil {
				t.Fatal(err)
			}
			s, err := ShedMiddleware(shedder)
			if err != nil {
				t.Fatal(err)
			}
			alone, withShed = httpServe(g), httpServe(s)
		} else {
			g, err := GateInterceptors(gate)
			if err != nil {
				t.Fatal(err)
			}
			s, err := ShedInterceptors(shedder)
			if err != nil {
				t.Fatal(err)
			}
			alone, withShed = grpcServe(g), grpcServe(s)
		}
		a := srvHeld(t, c, rounds, offered, alone)
		b := srvHeld(t, c, rounds, offered, withShed)
		for i := range a {
			if b[i] < a[i] {
				t.Fatalf("%s round %d: the README's shed wiring admitted %d, the gate alone %d (all rounds: %v against %v)", transport, i, b[i], a[i], b, a)
			}
		}
		t.Logf("%s: gate alone %v, with the shedder %v", transport, a, b)
	}
}
