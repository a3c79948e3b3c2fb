package interceptors

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// srvT0 is the start of every manual clock in these tests.
var srvT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// srvHealth is a health service whose behaviour each test sets: the gRPC
// service that ships with grpc-go, so the tests need no generated code.
type srvHealth struct {
	grpc_health_v1.UnimplementedHealthServer
	check func(ctx context.Context) error
	watch func(stream grpc_health_v1.Health_WatchServer) error
}

func (h *srvHealth) Check(ctx context.Context, _ *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	if h.check != nil {
		if err := h.check(ctx); err != nil {
			return nil, err
		}
	}
	return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
}

func (h *srvHealth) Watch(_ *grpc_health_v1.HealthCheckRequest, stream grpc_health_v1.Health_WatchServer) error {
	if h.watch != nil {
		return h.watch(stream)
	}
	return stream.Send(&grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING})
}

// srvStartGRPC serves h on 127.0.0.1:0 behind the interceptors and returns
// a client connected to it; both are closed when the test ends.
func srvStartGRPC(t *testing.T, h *srvHealth, ics ...GRPCInterceptors) grpc_health_v1.HealthClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var us []grpc.UnaryServerInterceptor
	var ss []grpc.StreamServerInterceptor
	var taps []tap.ServerInHandle
	for _, ic := range ics {
		us = append(us, ic.Unary)
		ss = append(ss, ic.Stream)
		if ic.Tap != nil {
			taps = append(taps, ic.Tap)
		}
	}
	opts := []grpc.ServerOption{grpc.ChainUnaryInterceptor(us...), grpc.ChainStreamInterceptor(ss...)}
	if len(taps) > 0 { // a server takes one tap handle: run the guards' in order
		opts = append(opts, grpc.InTapHandle(ChainTapHandles(taps...)))
	}
	s := grpc.NewServer(opts...)
	grpc_health_v1.RegisterHealthServer(s, h)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = s.Serve(lis)
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		s.Stop()
		<-served
	})
	return grpc_health_v1.NewHealthClient(conn)
}

// srvRetryInfo returns the RetryInfo delay of a status error, or -1.
func srvRetryInfo(t *testing.T, err error) time.Duration {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("not a status error: %v", err)
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return -1
}

func srvCtx(t *testing.T, kv ...string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	if len(kv) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	}
	return ctx
}

func TestGRPCRateLimitUnary(t *testing.T) {
	clk := clock.NewManual(srvT0)
	lim, err := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 2, Period: 10 * time.Second}, ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	key, err := MetadataKey("tenant")
	if err != nil {
		t.Fatal(err)
	}
	ic, err := RateLimitInterceptors([]GRPCQuota{{Name: "tenant", Limiter: lim, Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	c := srvStartGRPC(t, &srvHealth{}, ic)
	for i := range 2 {
		if _, err := c.Check(srvCtx(t, "tenant", "a"), &grpc_health_v1.HealthCheckRequest{}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	// The third is refused: the next token comes in 5 s.
	var trailer metadata.MD
	_, err = c.Check(srvCtx(t, "tenant", "a"), &grpc_health_v1.HealthCheckRequest{}, grpc.Trailer(&trailer))
	if got := status.Code(err); got != codes.ResourceExhausted {
		t.Fatalf("code %v, want ResourceExhausted (%v)", got, err)
	}
	if d := srvRetryInfo(t, err); d != 5*time.Second {
		t.Errorf("RetryInfo delay %v, want 5s", d)
	}
	if got := trailer.Get(RetryPushbackTrailer); len(got) != 1 || got[0] != "5000" {
		t.Errorf("pushback trailer %q, want [5000]", got)
	}
	// Another tenant has its own allowance.
	if _, err := c.Check(srvCtx(t, "tenant", "b"), &grpc_health_v1.HealthCheckRequest{}); err != nil {
		t.Fatalf("tenant b: %v", err)
	}
	// A missing key is the caller's mistake.
	_, err = c.Check(srvCtx(t), &grpc_health_v1.HealthCheckRequest{})
	if got := status.Code(err); got != codes.InvalidArgument {
		t.Errorf("no key: code %v, want InvalidArgument", got)
	}
	clk.Advance(5 * time.Second)
	if _, err := c.Check(srvCtx(t, "tenant", "a"), &grpc_health_v1.HealthCheckRequest{}); err != nil {
		t.Fatalf("after the retry time: %v", err)
	}
}

func TestGRPCRateLimitStreamAndJitter(t *testing.T) {
	clk := clock.NewManual(srvT0)
	lim, err := ratelimit.New(ratelimit.FixedWindow, ratelimit.Limit{Rate: 1, Period: time.Minute}, ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	ic, err := RateLimitInterceptors([]GRPCQuota{{Name: "method", Limiter: lim, Key: MethodKey}},
		WithRetryJitter(time.Second), WithJitterSource(func() float64 { return 0.5 }))
	if err != nil {
		t.Fatal(err)
	}
	c := srvStartGRPC(t, &srvHealth{}, ic)
	open := func() (metadata.MD, error) {
		st, err := c.Watch(srvCtx(t), &grpc_health_v1.HealthCheckRequest{})
		if err != nil {
			return nil, err
		}
		_, err = st.Recv()
		return st.Trailer(), err
	}
	if _, err := open(); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	tr, err := open()
	if got := status.Code(err); got != codes.ResourceExhausted {
		t.Fatalf("second stream: code %v, want ResourceExhausted", got)
	}
	// The window ends in 60 s (the clock starts at 03:04:05, 55 s before the
	// next minute: FixedWindow windows are aligned to the epoch); plus half
	// a second of jitter.
	want := 55*time.Second + 500*time.Millisecond
	if d := srvRetryInfo(t, err); d != want {
		t.Errorf("RetryInfo %v, want %v", d, want)
	}
	if got := tr.Get(RetryPushbackTrailer); len(got) != 1 || got[0] != "55500" {
		t.Errorf("pushback trailer %q, want [55500]", got)
	}
}

// srvFailingStore is a ratelimit.Store that is down.
type srvFailingStore struct{}

var errStoreDown = errors.New("store down")

func (srvFailingStore) Apply(context.Context, time.Time, []ratelimit.Request) error {
	return errStoreDown
}

func TestGRPCRateLimitStoreDown(t *testing.T) {
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 10, Period: time.Second}, ratelimit.WithStore(srvFailingStore{}))
	if err != nil {
		t.Fatal(err)
	}
	closed, err := RateLimitInterceptors([]GRPCQuota{{Name: "m", Limiter: lim, Key: MethodKey}}, WithStoreErrorRetry(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	c := srvStartGRPC(t, &srvHealth{}, closed)
	var trailer metadata.MD
	_, err = c.Check(srvCtx(t), &grpc_health_v1.HealthCheckRequest{}, grpc.Trailer(&trailer))
	if got := status.Code(err); got != codes.Unavailable {
		t.Fatalf("code %v, want Unavailable", got)
	}
	if d := srvRetryInfo(t, err); d != 250*time.Millisecond {
		t.Errorf("RetryInfo %v, want 250ms", d)
	}
	if got := trailer.Get(RetryPushbackTrailer); len(got) != 1 || got[0] != "250" {
		t.Errorf("trailer %q", got)
	}

	open, err := RateLimitInterceptors([]GRPCQuota{{Name: "m", Limiter: lim, Key: MethodKey}}, WithFailOpen(true))
	if err != nil {
		t.Fatal(err)
	}
	c = srvStartGRPC(t, &srvHealth{}, open)
	if _, err := c.Check(srvCtx(t), &grpc_health_v1.HealthCheckRequest{}); err != nil {
		t.Fatalf("fail open: %v", err)
	}
}

// srvReleases is a gate observer that reports every release on a channel.
type srvReleases struct {
	metrics.GateBase
	ch chan metrics.GateRelease
}

func (o *srvReleases) GateRelease(r metrics.GateRelease, _ time.Duration) { o.ch <- r }

func srvNewGate(t *testing.T, limit int) (*adaptive.Limiter, chan metrics.GateRelease) {
	t.Helper()
	obs := &srvReleases{ch: make(chan metrics.GateRelease, 16)}
	g, err := adaptive.New(adaptive.Fixed(limit), adaptive.WithClock(clock.NewManual(srvT0)), adaptive.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	return g, obs.ch
}

func TestGRPCGateOutcomes(t *testing.T) {
	gate, releases := srvNewGate(t, 1)
	ic, err := GateInterceptors(gate)
	if err != nil {
		t.Fatal(err)
	}
	var answer atomic.Pointer[error] // the test sets it, the server reads it
	c := srvStartGRPC(t, &srvHealth{check: func(context.Context) error { return *answer.Load() }}, ic)
	for _, tc := range []struct {
		err  error
		want metrics.GateRelease
	}{
		{nil, metrics.Success},
		{status.Error(codes.NotFound, "no"), metrics.Success},
		{status.Error(codes.Unavailable, "down"), metrics.Dropped},
		{status.Error(codes.ResourceExhausted, "full"), metrics.Dropped},
		{status.Error(codes.DeadlineExceeded, "slow"), metrics.Dropped},
		{context.DeadlineExceeded, metrics.Dropped},
		{status.Error(codes.Canceled, "gone"), metrics.Ignored},
	} {
		answer.Store(&tc.err)
		_, _ = c.Check(srvCtx(t), &grpc_health_v1.HealthCheckRequest{})
		if got := <-releases; got != tc.want {
			t.Errorf("handler error %v: released %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestGRPCGateClientCancelIgnored(t *testing.T) {
	gate, releases := srvNewGate(t, 1)
	ic, err := GateInterceptors(gate)
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{})
	c := srvStartGRPC(t, &srvHealth{check: func(ctx context.Context) error {
		close(entered)
		<-ctx.Done()
		return ctx.Err()
	}}, ic)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := c.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
		done <- err
	}()
	<-entered
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Errorf("client got %v, want Canceled", err)
	}
	if got := <-releases; got != metrics.Ignored {
		t.Errorf("released %v, want Ignored", got)
	}
}

func TestGRPCGateFullAndStreamHoldsToken(t *testing.T) {
	gate, releases := srvNewGate(t, 1)
	ic, err := GateInterceptors(gate, WithOverloadRetry(1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	c := srvStartGRPC(t, &srvHealth{watch: func(st grpc_health_v1.Health_WatchServer) error {
		if err := st.Send(&grpc_health_v1.HealthCheckResponse{}); err != nil {
			return err
		}
		<-stop
		return nil
	}}, ic)
	st, err := c.Watch(srvCtx(t), &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	// The open stream holds the only slot.
	if n := gate.InFlight(); n != 1 {
		t.Fatalf("in flight %d while the stream is open, want 1", n)
	}
	var trailer metadata.MD
	_, err = c.Check(srvCtx(t), &grpc_health_v1.HealthCheckRequest{}, grpc.Trailer(&trailer))
	if got := status.Code(err); got != codes.Unavailable {
		t.Fatalf("code %v, want Unavailable", got)
	}
	if d := srvRetryInfo(t, err); d != 1500*time.Millisecond {
		t.Errorf("RetryInfo %v, want 1.5s", d)
	}
	if got := trailer.Get(RetryPushbackTrailer); len(got) != 1 || got[0] != "1500" {
		t.Errorf("trailer %q", got)
	}
	// A second stream is refused too, with the trailer on the stream.
	st2, err := c.Watch(srvCtx(t), &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st2.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("second stream: %v, want Unavailable", err)
	}
	if got := st2.Trailer().Get(RetryPushbackTrailer); len(got) != 1 || got[0] != "1500" {
		t.Errorf("stream trailer %q", got)
	}
	close(stop)
	if _, err := st.Recv(); err == nil {
		t.Fatal("stream did not end")
	}
	if got := <-releases; got != metrics.Success {
		t.Errorf("stream released %v, want Success", got)
	}
	if n := gate.InFlight(); n != 0 {
		t.Errorf("in flight %d after the stream ended", n)
	}
	if _, err := c.Check(srvCtx(t), &grpc_health_v1.HealthCheckRequest{}); err != nil {
		t.Fatalf("after the stream: %v", err)
	}
	<-releases
}

// TestGRPCShedByPriority: a sheddable RPC is refused for the reserve kept
// for critical work, by the interceptor with the pushback trailer, and by
// the tap handle before any interceptor runs, with the RetryInfo detail
// alone; RPCs with no priority or an unreadable one are critical.
func TestGRPCShedByPriority(t *testing.T) {
	for _, tapped := range []bool{false, true} {
		t.Run(map[bool]string{false: "interceptor", true: "tap"}[tapped], func(t *testing.T) { srvShedByPriority(t, tapped) })
	}
}

func srvShedByPriority(t *testing.T, tapped bool) {
	gate, releases := srvNewGate(t, 2)
	s, err := shed.New(gate, shed.WithClock(clock.NewManual(srvT0)), shed.WithReserve(0.5))
	if err != nil {
		t.Fatal(err)
	}
	ic, err := ShedInterceptors(s)
	if err != nil {
		t.Fatal(err)
	}
	if !tapped {
		ic.Tap = nil
	}
	entered, stop := make(chan struct{}), make(chan struct{})
	c := srvStartGRPC(t, &srvHealth{watch: func(st grpc_health_v1.Health_WatchServer) error {
		close(entered)
		<-stop
		return nil
	}}, ic)
	// One stream in flight uses half the gate: the reserve is for Critical.
	st, err := c.Watch(srvCtx(t, PriorityMetadataKey, "critical"), &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	var trailer metadata.MD
	_, err = c.Check(srvCtx(t, PriorityMetadataKey, "sheddable"), &grpc_health_v1.HealthCheckRequest{}, grpc.Trailer(&trailer))
	if got := status.Code(err); got != codes.Unavailable {
		t.Fatalf("sheddable: code %v, want Unavailable", got)
	}
	if d := srvRetryInfo(t, err); d <= 0 {
		t.Errorf("RetryInfo %v, want positive", d)
	}
	if got := len(trailer.Get(RetryPushbackTrailer)); tapped && got != 0 || !tapped && got != 1 {
		t.Errorf("%d pushback trailers, want %d", got, map[bool]int{false: 1, true: 0}[tapped])
	}
	// No priority, or an unreadable one, is Critical: admitted.
	for _, md := range [][]string{nil, {PriorityMetadataKey, "urgent!!"}} {
		if _, err := c.Check(srvCtx(t, md...), &grpc_health_v1.HealthCheckRequest{}); err != nil {
			t.Fatalf("priority %q: %v", md, err)
		}
		<-releases
	}
	close(stop)
	_, _ = st.Recv()
	<-releases
}

func TestGRPCChain(t *testing.T) {
	clk := clock.NewManual(srvT0)
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 1, Period: time.Second}, ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	rl, err := RateLimitInterceptors([]GRPCQuota{{Name: "m", Limiter: lim, Key: MethodKey}})
	if err != nil {
		t.Fatal(err)
	}
	gate, releases := srvNewGate(t, 4)
	g, err := GateInterceptors(gate)
	if err != nil {
		t.Fatal(err)
	}
	c := srvStartGRPC(t, &srvHealth{}, rl, g)
	if _, err := c.Check(srvCtx(t), &grpc_health_v1.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	<-releases
	// Refused by the rate limit before it reaches the gate.
	if _, err := c.Check(srvCtx(t), &grpc_health_v1.HealthCheckRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("got %v, want ResourceExhausted", err)
	}
	select {
	case r := <-releases:
		t.Errorf("gate saw a refused request (%v)", r)
	default:
	}
}

func TestGRPCPanicReleasesToken(t *testing.T) {
	gate, _ := srvNewGate(t, 1)
	ic, err := GateInterceptors(gate)
	if err != nil {
		t.Fatal(err)
	}
	handler := func(context.Context, any) (any, error) { panic("boom") }
	func() {
		defer func() { _ = recover() }()
		_, _ = ic.Unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/s/m"}, handler)
	}()
	if n := gate.InFlight(); n != 0 {
		t.Fatalf("in flight %d after a panic", n)
	}
}

// A classifier that panics must not leak the token: it is released once,
// with Ignore, and the panic goes on.
func TestGRPCClassifierPanicReleasesToken(t *testing.T) {
	gate, releases := srvNewGate(t, 1)
	ic, err := GateInterceptors(gate, WithGRPCClassifier(func(context.Context, error) Outcome { panic("classifier") }))
	if err != nil {
		t.Fatal(err)
	}
	recovered := func(f func()) (r any) {
		defer func() { r = recover() }()
		f()
		return nil
	}
	unary := func(context.Context, any) (any, error) { return nil, nil }
	if r := recovered(func() {
		_, _ = ic.Unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/s/m"}, unary)
	}); r != "classifier" {
		t.Fatalf("unary: recovered %v, want the classifier's panic", r)
	}
	if r := <-releases; r != metrics.Ignored || gate.InFlight() != 0 {
		t.Errorf("unary: released %v, in flight %d", r, gate.InFlight())
	}
	stream := func(any, grpc.ServerStream) error { return nil }
	if r := recovered(func() {
		_ = ic.Stream(nil, srvFakeStream{ctx: context.Background()}, &grpc.StreamServerInfo{FullMethod: "/s/m"}, stream)
	}); r != "classifier" {
		t.Fatalf("stream: recovered %v, want the classifier's panic", r)
	}
	if r := <-releases; r != metrics.Ignored || gate.InFlight() != 0 {
		t.Errorf("stream: released %v, in flight %d", r, gate.InFlight())
	}
	select {
	case r := <-releases:
		t.Errorf("released twice (%v)", r)
	default:
	}
}

// srvFakeStream is a grpc.ServerStream with only a context.
type srvFakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s srvFakeStream) Context() context.Context { return s.ctx }

func TestGRPCConstructorErrors(t *testing.T) {
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 1, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func() error{
		"no quotas":   func() error { _, err := RateLimitInterceptors(nil); return err },
		"nil limiter": func() error { _, err := RateLimitInterceptors([]GRPCQuota{{Name: "a", Key: MethodKey}}); return err },
		"nil key":     func() error { _, err := RateLimitInterceptors([]GRPCQuota{{Name: "a", Limiter: lim}}); return err },
		"bad name": func() error {
			_, err := RateLimitInterceptors([]GRPCQuota{{Name: "a\n", Limiter: lim, Key: MethodKey}})
			return err
		},
		"duplicate name": func() error {
			_, err := RateLimitInterceptors([]GRPCQuota{{"a", lim, MethodKey}, {"a", lim, MethodKey}})
			return err
		},
		"http option, converted": func() error {
			_, err := RateLimitInterceptors([]GRPCQuota{{"a", lim, MethodKey}}, ServerOption(WithHTTPPriority(HeaderPriority)))
			return err
		},
		"gate option, converted": func() error {
			_, err := RateLimitInterceptors([]GRPCQuota{{"a", lim, MethodKey}}, ServerOption(WithOverloadRetry(time.Second)))
			return err
		},
		"bad retry": func() error {
			_, err := RateLimitInterceptors([]GRPCQuota{{"a", lim, MethodKey}}, WithStoreErrorRetry(0))
			return err
		},
		"nil gate":       func() error { _, err := GateInterceptors(nil); return err },
		"nil shedder":    func() error { _, err := ShedInterceptors(nil); return err },
		"nil classifier": func() error { _, err := ShedInterceptors(nil, WithGRPCClassifier(nil)); return err },
		"zero option":    func() error { _, err := GateInterceptors(nil, ServerOption{}); return err },
		"neg jitter":     func() error { _, err := GateInterceptors(nil, WithRetryJitter(-1)); return err },
	} {
		if err := f(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestDefaultGRPCClassifierCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := DefaultGRPCClassifier(ctx, nil); got != OutcomeIgnore {
		t.Errorf("canceled context: %v, want ignore", got)
	}
	if got := DefaultGRPCClassifier(context.Background(), errors.New("x")); got != OutcomeSuccess {
		t.Errorf("plain error: %v, want success", got)
	}
}

// TestGRPCStorePolicies: a failed store's fail-closed decision is
// UNAVAILABLE with the policy's retry time (never RESOURCE_EXHAUSTED), and
// WithFailOpen admits it; fail-open and local decisions admit; a full
// store's refusal is UNAVAILABLE with its hint, also with WithFailOpen.
func TestGRPCStorePolicies(t *testing.T) {
	clk := clock.NewManual(srvT0)
	for _, tc := range []struct {
		src      ratelimit.Source
		failOpen bool
		code     codes.Code
	}{
		{ratelimit.SourceFailClosed, false, codes.Unavailable},
		{ratelimit.SourceFailClosed, true, codes.OK},
		{ratelimit.SourceFailOpen, false, codes.OK},
		{ratelimit.SourceFailLocal, false, codes.OK},
		{ratelimit.SourceFull, false, codes.Unavailable},
		{ratelimit.SourceFull, true, codes.Unavailable}, // a full store is no failure
	} {
		local, _ := ratelimit.NewMemoryStore(100)
		lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 10, Period: time.Second},
			ratelimit.WithStore(srvPolicyStore{src: tc.src, retry: 250 * time.Millisecond, local: local}), ratelimit.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		var opts []RateLimitInterceptorsOption
		if tc.failOpen {
			opts = append(opts, WithFailOpen(true))
		}
		ics, err := RateLimitInterceptors([]GRPCQuota{{Name: "per-method", Limiter: lim, Key: MethodKey}}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		c := srvStartGRPC(t, &srvHealth{}, ics)
		var trailer metadata.MD
		_, err = c.Check(srvCtx(t), &grpc_health_v1.HealthCheckRequest{}, grpc.Trailer(&trailer))
		if got := status.Code(err); got != tc.code {
			t.Fatalf("%v (fail open %v): %v, want %v", tc.src, tc.failOpen, err, tc.code)
		}
		if tc.code == codes.Unavailable {
			if d := srvRetryInfo(t, err); d != 250*time.Millisecond {
				t.Errorf("RetryInfo %v, want 250ms", d)
			}
			if got := trailer.Get(RetryPushbackTrailer); len(got) != 1 || got[0] != "250" {
				t.Errorf("trailer %q", got)
			}
		}
	}
}

// srvFront is a front signal whose queue the test sets.
type srvFront struct{ queue atomic.Int64 }

func (f *srvFront) Queue() int                  { return int(f.queue.Load()) }
func (f *srvFront) Delay() (time.Duration, int) { return 0, 0 }

// TestGRPCTapRefusesBeforeTheRPC: the gate's and the shedder's tap handles
// refuse what the gate's front limit refuses before any interceptor or
// handler runs, with UNAVAILABLE and a RetryInfo detail, and let everything
// through once the front queue is short.
func TestGRPCTapRefusesBeforeTheRPC(t *testing.T) {
	for _, name := range []string{"gate", "shed"} {
		t.Run(name, func(t *testing.T) {
			clk := clock.NewManual(srvT0)
			front := &srvFront{}
			gate, err := adaptive.New(adaptive.Fixed(10), adaptive.WithClock(clk), adaptive.WithFrontSignal(front))
			if err != nil {
				t.Fatal(err)
			}
			var ic GRPCInterceptors
			if name == "gate" {
				ic, err = GateInterceptors(gate)
			} else {
				var s *shed.Shedder
				if s, err = shed.New(gate, shed.WithClock(clk)); err == nil {
					ic, err = ShedInterceptors(s)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			if ic.Tap == nil {
				t.Fatal("no tap handle")
			}
			var reached atomic.Int64 // RPCs that reached the interceptors
			outer := GRPCInterceptors{
				Unary: func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
					reached.Add(1)
					return h(ctx, req)
				},
				Stream: func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
					reached.Add(1)
					return h(srv, ss)
				},
			}
			c := srvStartGRPC(t, &srvHealth{}, outer, ic)
			front.queue.Store(int64(gate.FrontLimit()))
			clk.Advance(time.Millisecond) // the front reads the queue afresh
			for range 3 {
				_, err := c.Check(srvCtx(t), &grpc_health_v1.HealthCheckRequest{})
				if got := status.Code(err); got != codes.Unavailable {
					t.Fatalf("front queue full: code %v (%v), want Unavailable", got, err)
				}
				if d := srvRetryInfo(t, err); d <= 0 {
					t.Fatalf("RetryInfo %v, want positive", d)
				}
			}
			st, err := c.Watch(srvCtx(t), &grpc_health_v1.HealthCheckRequest{})
			if err == nil {
				_, err = st.Recv()
			}
			if got := status.Code(err); got != codes.Unavailable {
				t.Fatalf("stream with the front queue full: code %v, want Unavailable", got)
			}
			if n := reached.Load(); n != 0 || gate.InFlight() != 0 {
				t.Fatalf("%d refused RPCs reached the interceptors, %d in flight", n, gate.InFlight())
			}
			front.queue.Store(0)
			clk.Advance(time.Millisecond)
			if _, err := c.Check(srvCtx(t), &grpc_health_v1.HealthCheckRequest{}); err != nil {
				t.Fatalf("front queue empty: %v", err)
			}
			if reached.Load() != 1 {
				t.Fatalf("%d RPCs reached the interceptors, want 1", reached.Load())
			}
		})
	}
}

// TestChainTapHandles: the taps run in order, each with the context the
// previous returned; the first refusal ends the chain with its error; nil
// taps are skipped, and an empty chain lets everything through.
func TestChainTapHandles(t *testing.T) {
	type key struct{}
	var ran []string
	add := func(name string) tap.ServerInHandle {
		return func(ctx context.Context, _ *tap.Info) (context.Context, error) {
			ran = append(ran, name+":"+fmt.Sprint(ctx.Value(key{})))
			return context.WithValue(ctx, key{}, name), nil
		}
	}
	refuse := func(ctx context.Context, _ *tap.Info) (context.Context, error) {
		ran = append(ran, "refuse")
		return ctx, status.Error(codes.Unavailable, "no")
	}
	ctx, err := ChainTapHandles(add("a"), nil, add("b"))(context.Background(), &tap.Info{})
	if err != nil || ctx.Value(key{}) != "b" || fmt.Sprint(ran) != "[a:<nil> b:a]" {
		t.Fatalf("ran %v, context value %v, err %v", ran, ctx.Value(key{}), err)
	}
	ran = nil
	_, err = ChainTapHandles(add("a"), refuse, add("c"))(context.Background(), &tap.Info{})
	if status.Code(err) != codes.Unavailable || fmt.Sprint(ran) != "[a:<nil> refuse]" {
		t.Fatalf("ran %v, err %v: want a, then the refusal, and c not run", ran, err)
	}
	if _, err := ChainTapHandles()(context.Background(), &tap.Info{}); err != nil {
		t.Fatalf("empty chain: %v", err)
	}
}
