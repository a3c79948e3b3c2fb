package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/gradient"
	"github.com/sluicehq/sluice/interceptors"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/vegas"
)

// contender is one way of guarding the handler. Each server process builds
// its guard afresh (a new gate, a new limiter), so nothing learnt in one run
// reaches another.
type contender struct {
	name  string
	about string
	// extra contenders run only when named in -contenders.
	extra bool
	// http returns the middleware; nil means the bare handler.
	http func() (func(http.Handler) http.Handler, error)
	// grpc returns the interceptors (the unary one and the tap handle are
	// installed); nil means none.
	grpc func() (interceptors.GRPCInterceptors, error)
}

// contenders is the list the benchmark knows, in report order. A new
// contender is one line here.
var contenders = []contender{
	{name: "none", about: "the bare handler"},
	{name: "gradient", about: "interceptors.GateMiddleware / GateInterceptors over adaptive.New(gradient.New()), defaults", http: gateHTTP(gradientGate), grpc: gateGRPC(gradientGate)},
	{name: "vegas", about: "interceptors.GateMiddleware / GateInterceptors over adaptive.New(vegas.New()), defaults", http: gateHTTP(vegasGate), grpc: gateGRPC(vegasGate)},
	{name: "shed", about: "interceptors.ShedMiddleware / ShedInterceptors over shed.New(gate, shed.WithReserve(0.2)), gate adaptive.New(gradient.New())", http: shedHTTP(readmeShedder), grpc: shedGRPC(readmeShedder)},
	{name: "failsafe", about: "failsafe-go adaptivelimiter.NewBuilder[any]().Build() (defaults), TryAcquirePermit or 503 / UNAVAILABLE, Record after the handler", http: failsafeHTTP(defaultFailsafe), grpc: failsafeGRPC(defaultFailsafe)},
	{name: "shed-sched", about: "as shed, plus shed.WithSaturation(shed.SchedulerLatency(0.99, 5ms)) (shed's example)", http: shedHTTP(schedShedder), grpc: shedGRPC(schedShedder)},
	{name: "gradient-nofront", extra: true, about: "as gradient, with the front limit off (adaptive.WithFrontSignal(nil)): what the gate's own limit refuses", http: gateHTTP(gradientNoFront), grpc: gateGRPC(gradientNoFront)},
	{name: "gradient-notap", extra: true, about: "as gradient, without GateInterceptors's tap handle (gRPC; HTTP as gradient): the front limit's refusals made by the interceptor", http: gateHTTP(gradientGate), grpc: noTap(gateGRPC(gradientGate))},
	{name: "shed-notap", extra: true, about: "as shed, without ShedInterceptors's tap handle (gRPC; HTTP as shed)", http: shedHTTP(readmeShedder), grpc: noTap(shedGRPC(readmeShedder))},
	{name: "shed-maxrtt", extra: true, about: "as shed, over a gate with an absolute RTT bound: adaptive.New(gradient.New(gradient.WithMaxRTT(5ms))) (the quick start before it became gradient.New())", http: shedHTTP(maxRTTShedder), grpc: shedGRPC(maxRTTShedder)},
}

// refusalPath is a guard held full, so that it refuses every request: the
// benchmark runs each against a one-core server to measure what a refusal
// costs the server. A new one is one line here.
type refusalPath struct {
	name  string
	about string
	http  func() (func(http.Handler) http.Handler, error)
	grpc  func() (interceptors.GRPCInterceptors, error)
}

var refusalPaths = []refusalPath{
	{name: "gate", about: "GateMiddleware / GateInterceptors over a gate held full (adaptive.Fixed(1), its one token never released)", http: gateHTTP(fullGate), grpc: gateGRPC(fullGate)},
	{name: "shed", about: "ShedMiddleware / ShedInterceptors with shed.WithReserve(0.2) over a gate held full", http: shedHTTP(fullShedder), grpc: shedGRPC(fullShedder)},
	{name: "front", about: "GateMiddleware / GateInterceptors (its tap handle on gRPC) over a gate whose front limit refuses everything (a front signal that always reads a full queue)", http: gateHTTP(fullFrontGate), grpc: gateGRPC(fullFrontGate)},
	{name: "failsafe", about: "the failsafe wrapper over an adaptivelimiter pinned at 1 (WithLimits(1, 1, 1)), its one permit held", http: failsafeHTTP(fullFailsafe), grpc: failsafeGRPC(fullFailsafe)},
}

// findRefusalPath returns the refusal path called name.
func findRefusalPath(name string) (refusalPath, error) {
	for _, r := range refusalPaths {
		if r.name == name {
			return r, nil
		}
	}
	return refusalPath{}, fmt.Errorf("unknown refusal path %q", name)
}

// findContender returns the contender called name.
func findContender(name string) (contender, error) {
	for _, c := range contenders {
		if c.name == name {
			return c, nil
		}
	}
	return contender{}, fmt.Errorf("unknown contender %q", name)
}

func gradientGate() (*adaptive.Limiter, error) { return keepGate(adaptive.New(gradient.New())) }

func gradientNoFront() (*adaptive.Limiter, error) {
	return keepGate(adaptive.New(gradient.New(), adaptive.WithFrontSignal(nil)))
}
func vegasGate() (*adaptive.Limiter, error) { return keepGate(adaptive.New(vegas.New())) }

// fullGate returns a gate of limit 1 whose one token is taken and never
// released: it refuses every request.
func fullGate() (*adaptive.Limiter, error) {
	gate, err := adaptive.New(adaptive.Fixed(1))
	if err != nil {
		return nil, err
	}
	if _, ok := gate.TryAcquire(); !ok {
		return nil, fmt.Errorf("a fresh gate of limit 1 refused its first token")
	}
	return gate, nil
}

// fullFront is a front signal that always reads a full queue.
type fullFront struct{}

func (fullFront) Queue() int                  { return math.MaxInt32 }
func (fullFront) Delay() (time.Duration, int) { return 0, 0 }

// fullFrontGate returns a gate whose front limit refuses every request.
func fullFrontGate() (*adaptive.Limiter, error) {
	return adaptive.New(adaptive.Fixed(1000), adaptive.WithFrontSignal(fullFront{}))
}

// fullShedder is a shedder over fullGate.
func fullShedder() (*shed.Shedder, error) {
	gate, err := fullGate()
	if err != nil {
		return nil, err
	}
	return shed.New(gate, shed.WithReserve(0.2))
}

func defaultFailsafe() (adaptivelimiter.AdaptiveLimiter[any], error) {
	return adaptivelimiter.NewBuilder[any]().Build(), nil
}

// fullFailsafe is failsafe-go's limiter pinned at 1 with its permit taken.
func fullFailsafe() (adaptivelimiter.AdaptiveLimiter[any], error) {
	lim := adaptivelimiter.NewBuilder[any]().WithLimits(1, 1, 1).Build()
	if _, ok := lim.TryAcquirePermit(); !ok {
		return nil, fmt.Errorf("a fresh limiter of limit 1 refused its first permit")
	}
	return lim, nil
}

// readmeShedder is the README's quick start over a default gradient gate.
func readmeShedder() (*shed.Shedder, error) {
	gate, err := keepGate(adaptive.New(gradient.New()))
	if err != nil {
		return nil, err
	}
	return shed.New(gate, shed.WithReserve(0.2))
}

// maxRTTShedder is readmeShedder over a gate with an absolute RTT bound of
// 5 ms: the quick start's gate before it became gradient.New().
func maxRTTShedder() (*shed.Shedder, error) {
	gate, err := keepGate(adaptive.New(gradient.New(gradient.WithMaxRTT(5 * time.Millisecond))))
	if err != nil {
		return nil, err
	}
	return shed.New(gate, shed.WithReserve(0.2))
}

// schedShedder is readmeShedder plus the Go scheduler's latency as a local
// saturation signal (shed's example: p99 above 5 ms).
func schedShedder() (*shed.Shedder, error) {
	gate, err := keepGate(adaptive.New(gradient.New()))
	if err != nil {
		return nil, err
	}
	sat, err := shed.SchedulerLatency(0.99, 5*time.Millisecond)
	if err != nil {
		return nil, err
	}
	return shed.New(gate, shed.WithReserve(0.2), shed.WithSaturation(sat))
}

func gateHTTP(newGate func() (*adaptive.Limiter, error)) func() (func(http.Handler) http.Handler, error) {
	return func() (func(http.Handler) http.Handler, error) {
		gate, err := newGate()
		if err != nil {
			return nil, err
		}
		return interceptors.GateMiddleware(gate)
	}
}

func gateGRPC(newGate func() (*adaptive.Limiter, error)) func() (interceptors.GRPCInterceptors, error) {
	return func() (interceptors.GRPCInterceptors, error) {
		gate, err := newGate()
		if err != nil {
			return interceptors.GRPCInterceptors{}, err
		}
		return interceptors.GateInterceptors(gate)
	}
}

// noTap is newGuard without its tap handle.
func noTap(newGuard func() (interceptors.GRPCInterceptors, error)) func() (interceptors.GRPCInterceptors, error) {
	return func() (interceptors.GRPCInterceptors, error) {
		ic, err := newGuard()
		ic.Tap = nil
		return ic, err
	}
}

func shedHTTP(newShedder func() (*shed.Shedder, error)) func() (func(http.Handler) http.Handler, error) {
	return func() (func(http.Handler) http.Handler, error) {
		s, err := newShedder()
		if err != nil {
			return nil, err
		}
		return interceptors.ShedMiddleware(s)
	}
}

func shedGRPC(newShedder func() (*shed.Shedder, error)) func() (interceptors.GRPCInterceptors, error) {
	return func() (interceptors.GRPCInterceptors, error) {
		s, err := newShedder()
		if err != nil {
			return interceptors.GRPCInterceptors{}, err
		}
		return interceptors.ShedInterceptors(s)
	}
}

// failsafeHTTP wraps the handler as bench/simpeers wraps failsafe-go in the
// simulator: TryAcquirePermit (never waits), 503 when refused, Record when
// the handler returns.
func failsafeHTTP(newLim func() (adaptivelimiter.AdaptiveLimiter[any], error)) func() (func(http.Handler) http.Handler, error) {
	return func() (func(http.Handler) http.Handler, error) {
		lim, err := newLim()
		if err != nil {
			return nil, err
		}
		return func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				permit, ok := lim.TryAcquirePermit()
				if !ok {
					http.Error(w, "over the adaptive limit", http.StatusServiceUnavailable)
					return
				}
				defer permit.Record()
				next.ServeHTTP(w, r)
			})
		}, nil
	}
}

// failsafeGRPC is failsafeHTTP for gRPC: UNAVAILABLE when refused.
func failsafeGRPC(newLim func() (adaptivelimiter.AdaptiveLimiter[any], error)) func() (interceptors.GRPCInterceptors, error) {
	return func() (interceptors.GRPCInterceptors, error) {
		lim, err := newLim()
		if err != nil {
			return interceptors.GRPCInterceptors{}, err
		}
		return interceptors.GRPCInterceptors{Unary: func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			permit, ok := lim.TryAcquirePermit()
			if !ok {
				return nil, status.Error(codes.Unavailable, "over the adaptive limit")
			}
			defer permit.Record()
			return handler(ctx, req)
		}}, nil
	}
}
