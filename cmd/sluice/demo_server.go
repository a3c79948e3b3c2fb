package main

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/gradient"
	"github.com/sluicehq/sluice/interceptors"
	"github.com/sluicehq/sluice/metrics/prom"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// demoAPIKeyHeader carries the caller's API key (HTTP header; the gRPC
// metadata key is its lower-case form).
const demoAPIKeyHeader = "X-API-Key"

// demoUserHeader carries the end user's id, by which the shedder groups
// requests into cohorts.
const demoUserHeader = "X-User"

// demoMachine models the capacity of a real server in real time without
// burning CPU: cores virtual cores shared by processor sharing, with a
// contention penalty past the core count (lock contention, cache misses,
// GC pressure). While n requests are in flight, each advances through its
// work (core time at no load) at the rate 1/stretch(n), where
//
//	stretch(n) = max(1, n/c) · (1 + κ·max(0, n−c))
//
// so the machine completes at most c/S requests per second (S the mean
// work), and fewer once n passes c: unbounded in-flight makes every request
// slow, which is how a server without admission control dies.
//
// It is simulated exactly and cheaply: all requests in flight advance at the
// same rate, so one clock, the work attained by each since the start (w),
// tells every request's progress; a request finishes when w reaches its
// start value plus its work. A heap orders the requests by that finish
// value, and one timer wakes the machine at the next finish. A request whose
// client gives up leaves at once.
type demoMachine struct {
	cores float64
	kappa float64
	mean  time.Duration // mean work per request
	floor time.Duration // fixed part of the work (parsing, serialisation)

	mu       sync.Mutex
	w        float64   // work attained by every request in flight since the start, ns
	last     time.Time // when w was last advanced
	jobs     demoJobs
	timer    *time.Timer
	inFlight atomic.Int64 // len(jobs), readable without the lock
}

// demoJob is one request on the machine: it finishes when w reaches
// finish, and done is then closed.
type demoJob struct {
	finish float64
	done   chan struct{}
	index  int // in the heap; -1 once finished or gone
}

type demoJobs []*demoJob

func (h demoJobs) Len() int           { return len(h) }
func (h demoJobs) Less(i, j int) bool { return h[i].finish < h[j].finish }
func (h demoJobs) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *demoJobs) Push(x any) {
	j := x.(*demoJob)
	j.index = len(*h)
	*h = append(*h, j)
}
func (h *demoJobs) Pop() any {
	old := *h
	j := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	j.index = -1
	return j
}

func newDemoMachine(cores int, kappa float64, mean time.Duration) *demoMachine {
	m := &demoMachine{cores: float64(cores), kappa: kappa, mean: mean, floor: mean / 10, last: time.Now()}
	m.timer = time.AfterFunc(time.Hour, m.wake)
	m.timer.Stop()
	return m
}

func (m *demoMachine) stretch(n int) float64 {
	x := float64(n)
	s := max(1, x/m.cores)
	if x > m.cores {
		s *= 1 + m.kappa*(x-m.cores)
	}
	return s
}

// work draws a request's core time: floor plus an exponential remainder,
// mean in total.
func (m *demoMachine) work() time.Duration {
	return m.floor + time.Duration(rand.ExpFloat64()*float64(m.mean-m.floor))
}

// advance brings w up to now at the current rate. Callers hold mu.
func (m *demoMachine) advance(now time.Time) {
	if n := len(m.jobs); n > 0 {
		m.w += float64(now.Sub(m.last)) / m.stretch(n)
	}
	m.last = now
}

// reschedule sets the timer for the next finish. Callers hold mu.
func (m *demoMachine) reschedule() {
	m.inFlight.Store(int64(len(m.jobs)))
	if len(m.jobs) == 0 {
		m.timer.Stop()
		return
	}
	d := (m.jobs[0].finish - m.w) * m.stretch(len(m.jobs))
	m.timer.Reset(time.Duration(max(d, 0)) + time.Microsecond)
}

// wake finishes the requests whose work is done.
func (m *demoMachine) wake() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advance(time.Now())
	for len(m.jobs) > 0 && m.jobs[0].finish <= m.w {
		close(heap.Pop(&m.jobs).(*demoJob).done)
	}
	m.reschedule()
}

// serve runs one request of core time w on the machine. It returns ctx's
// error if the client gives up first: the request then leaves the machine.
func (m *demoMachine) serve(ctx context.Context, w time.Duration) error {
	j := &demoJob{done: make(chan struct{})}
	m.mu.Lock()
	m.advance(time.Now())
	j.finish = m.w + float64(w)
	heap.Push(&m.jobs, j)
	m.reschedule()
	m.mu.Unlock()
	select {
	case <-j.done:
		return nil
	case <-ctx.Done():
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if j.index < 0 { // finished meanwhile
		return nil
	}
	m.advance(time.Now())
	heap.Remove(&m.jobs, j.index)
	j.index = -1
	m.reschedule()
	return ctx.Err()
}

// stop stops the machine's timer; call it once no request is left.
func (m *demoMachine) stop() { m.timer.Stop() }

// demoGuards are the protected copy's guards, shared by its HTTP and gRPC
// front doors: both serve from one machine, so they share one gate.
type demoGuards struct {
	reg     *prometheus.Registry
	gate    *adaptive.Limiter
	shedder *shed.Shedder
	perKey  *ratelimit.Limiter
}

func newDemoGuards(cfg *demoConfig) (*demoGuards, error) {
	reg := prometheus.NewRegistry()
	m, err := prom.New(reg)
	if err != nil {
		return nil, err
	}
	gate, err := adaptive.New(gradient.New(), adaptive.WithMaxLimit(1000), adaptive.WithObserver(m))
	if err != nil {
		return nil, err
	}
	// The reserve keeps a fifth of the gate's limit for critical work
	// (shed.WithReserve): sheddable requests cannot fill the gate. The
	// simulator's shed policies keep three quarters, which protects the
	// critical priorities better under the surge (~95% instead of ~85%
	// here) but, as the reserve holds at any load, also refuses some
	// sheddable requests at half capacity; the demo shows the quieter
	// trade-off.
	shedder, err := shed.New(gate, shed.WithReserve(0.2), shed.WithObserver(m))
	if err != nil {
		return nil, err
	}
	perKey, err := ratelimit.New(ratelimit.TokenBucket,
		ratelimit.Limit{Rate: cfg.keyRate, Period: time.Second, Burst: cfg.keyRate},
		ratelimit.WithName("per-key"), ratelimit.WithObserver(m))
	if err != nil {
		return nil, err
	}
	m.AttachGate(gate)
	m.AttachShedder(shedder)
	return &demoGuards{reg: reg, gate: gate, shedder: shedder, perKey: perKey}, nil
}

// httpMiddleware returns the HTTP guards in their order: the per-key rate
// limit outside, then the shedder, which admits through the gate.
func (g *demoGuards) httpMiddleware() (func(http.Handler) http.Handler, error) {
	key, err := interceptors.APIKey(demoAPIKeyHeader)
	if err != nil {
		return nil, err
	}
	limit, err := interceptors.RateLimitMiddleware([]interceptors.HTTPQuota{{Name: "per-key", Limiter: g.perKey, Key: key}})
	if err != nil {
		return nil, err
	}
	shedMW, err := interceptors.ShedMiddleware(g.shedder, interceptors.WithHTTPUser(func(r *http.Request) uint64 {
		return shed.UserHash(r.Header.Get(demoUserHeader))
	}))
	if err != nil {
		return nil, err
	}
	return func(h http.Handler) http.Handler { return limit(shedMW(h)) }, nil
}

// grpcInterceptors returns the gRPC guards in the same order, and the
// shedder's tap handle.
func (g *demoGuards) grpcInterceptors() ([]grpc.UnaryServerInterceptor, []grpc.StreamServerInterceptor, tap.ServerInHandle, error) {
	key, err := interceptors.MetadataAPIKey(demoAPIKeyHeader)
	if err != nil {
		return nil, nil, nil, err
	}
	limit, err := interceptors.RateLimitInterceptors([]interceptors.GRPCQuota{{Name: "per-key", Limiter: g.perKey, Key: key}})
	if err != nil {
		return nil, nil, nil, err
	}
	sh, err := interceptors.ShedInterceptors(g.shedder, interceptors.WithGRPCUser(func(ctx context.Context, _ string) uint64 {
		var id string
		if vs := metadata.ValueFromIncomingContext(ctx, demoUserHeader); len(vs) > 0 {
			id = vs[0]
		}
		return shed.UserHash(id)
	}))
	if err != nil {
		return nil, nil, nil, err
	}
	return []grpc.UnaryServerInterceptor{limit.Unary, sh.Unary},
		[]grpc.StreamServerInterceptor{limit.Stream, sh.Stream}, sh.Tap, nil
}

// demoService is one copy of the service: an HTTP server and a gRPC server
// (the standard health service) doing their work on one machine, with or
// without guards.
type demoService struct {
	name     string
	machine  *demoMachine
	guards   *demoGuards // nil: unprotected
	httpLis  net.Listener
	grpcLis  net.Listener
	httpSrv  *http.Server
	grpcSrv  *grpc.Server
	serveErr chan error
	wg       sync.WaitGroup
}

func newDemoService(name string, cfg *demoConfig, guards *demoGuards, httpAddr, grpcAddr string) (svc *demoService, err error) {
	svc = &demoService{
		name:     name,
		machine:  newDemoMachine(cfg.cores, cfg.kappa, cfg.service),
		guards:   guards,
		serveErr: make(chan error, 2),
	}
	work := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := svc.machine.serve(r.Context(), svc.machine.work()); err != nil {
			return // the client went away; nobody reads the answer
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	workRPC := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := svc.machine.serve(ctx, svc.machine.work()); err != nil {
			return nil, status.FromContextError(err).Err()
		}
		return h(ctx, req)
	}
	var handler http.Handler = work
	unary := []grpc.UnaryServerInterceptor{workRPC}
	var stream []grpc.StreamServerInterceptor
	var tapHandle tap.ServerInHandle
	mux := http.NewServeMux()
	if guards != nil {
		mw, err := guards.httpMiddleware()
		if err != nil {
			return nil, err
		}
		handler = mw(work)
		u, s, t, err := guards.grpcInterceptors()
		if err != nil {
			return nil, err
		}
		unary, stream, tapHandle = append(u, workRPC), s, t
		mux.Handle("GET /metrics", promhttp.HandlerFor(guards.reg, promhttp.HandlerOpts{}))
	}
	mux.Handle("/", handler)

	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true) // h2c: a client's timeout resets its stream, not its connection
	svc.httpSrv = &http.Server{
		Handler:           mux,
		Protocols:         &protos,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: 10000},
		ReadHeaderTimeout: 5 * time.Second,
	}
	opts := []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary...)}
	if len(stream) > 0 {
		opts = append(opts, grpc.ChainStreamInterceptor(stream...))
	}
	if tapHandle != nil {
		opts = append(opts, grpc.InTapHandle(tapHandle))
	}
	svc.grpcSrv = grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(svc.grpcSrv, health.NewServer())

	defer func() {
		if err != nil {
			svc.closeListeners()
		}
	}()
	if svc.httpLis, err = net.Listen("tcp", httpAddr); err != nil {
		return nil, fmt.Errorf("%s HTTP: %w", name, err)
	}
	if svc.grpcLis, err = net.Listen("tcp", grpcAddr); err != nil {
		return nil, fmt.Errorf("%s gRPC: %w", name, err)
	}
	return svc, nil
}

func (svc *demoService) closeListeners() {
	for _, l := range []net.Listener{svc.httpLis, svc.grpcLis} {
		if l != nil {
			l.Close()
		}
	}
}

func (svc *demoService) httpURL() string  { return "http://" + svc.httpLis.Addr().String() }
func (svc *demoService) grpcAddr() string { return svc.grpcLis.Addr().String() }

// start serves HTTP and gRPC in two goroutines, which stop returns.
func (svc *demoService) start() {
	svc.wg.Go(func() {
		if err := svc.httpSrv.Serve(svc.httpLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			svc.serveErr <- fmt.Errorf("%s HTTP: %w", svc.name, err)
		}
	})
	svc.wg.Go(func() {
		if err := svc.grpcSrv.Serve(svc.grpcLis); err != nil {
			svc.serveErr <- fmt.Errorf("%s gRPC: %w", svc.name, err)
		}
	})
}

// stop shuts both servers down, waiting up to a few seconds for requests
// still running, and returns once their goroutines have returned.
func (svc *demoService) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := svc.httpSrv.Shutdown(ctx)
	if err != nil {
		svc.httpSrv.Close()
	}
	done := make(chan struct{})
	go func() { svc.grpcSrv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		svc.grpcSrv.Stop()
		<-done
	}
	svc.wg.Wait()
	svc.machine.stop()
	close(svc.serveErr)
	for e := range svc.serveErr {
		err = errors.Join(err, e)
	}
	return err
}

// inFlight returns the requests on the machine now.
func (svc *demoService) inFlight() int { return int(svc.machine.inFlight.Load()) }
