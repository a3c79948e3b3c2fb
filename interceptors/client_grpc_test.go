package interceptors

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/shed"
)

// cliNoInfo as cliHealth.retryInfo means no RetryInfo detail.
const cliNoInfo = time.Duration(math.MinInt64)

// cliHealth is a real gRPC health server that refuses the first refuse
// calls (or streams) with code, the grpc-retry-pushback-ms trailer pushback
// ("" for none) and a RetryInfo of retryInfo (cliNoInfo for none), and
// answers SERVING after. It records the priority metadata it receives.
type cliHealth struct {
	healthpb.UnimplementedHealthServer
	refuse    int
	code      codes.Code
	pushback  string
	retryInfo time.Duration

	mu    sync.Mutex
	calls int
	prios []string
}

// arrive records a call and returns its refusal, or nil.
func (h *cliHealth) arrive(ctx context.Context, setTrailer func(metadata.MD)) error {
	md, _ := metadata.FromIncomingContext(ctx)
	h.mu.Lock()
	h.calls++
	n := h.calls
	h.prios = append(h.prios, md.Get(PriorityMetadataKey)...)
	h.mu.Unlock()
	if n > h.refuse {
		return nil
	}
	if h.pushback != "" {
		setTrailer(metadata.Pairs(RetryPushbackTrailer, h.pushback))
	}
	st := status.New(h.code, "overloaded")
	if h.retryInfo != cliNoInfo {
		var err error
		if st, err = st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(h.retryInfo)}); err != nil {
			return status.Error(codes.Internal, err.Error())
		}
	}
	return st.Err()
}

func (h *cliHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if err := h.arrive(ctx, func(md metadata.MD) { grpc.SetTrailer(ctx, md) }); err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (h *cliHealth) Watch(_ *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	if err := h.arrive(stream.Context(), stream.SetTrailer); err != nil {
		return err
	}
	return stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

func (h *cliHealth) seen() (calls int, prios []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls, slices.Clone(h.prios)
}

// cliGRPC starts h on 127.0.0.1:0 and returns a health client whose
// connection uses the client interceptors built from opts; both are closed
// at the end of the test.
func cliGRPC(t *testing.T, h *cliHealth, opts ...ClientOption) healthpb.HealthClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, h)
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-served })

	unary, err := UnaryClientInterceptor(opts...)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := StreamClientInterceptor(opts...)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(unary), grpc.WithStreamInterceptor(stream))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func TestClientUnaryHonoursPushback(t *testing.T) {
	for _, tc := range []struct {
		name      string
		code      codes.Code
		pushback  string
		retryInfo time.Duration
		min       time.Duration
	}{
		{"trailer and RetryInfo, the longer wins", codes.Unavailable, "1500", 2 * time.Second, 2 * time.Second},
		{"trailer longer than RetryInfo", codes.Unavailable, "2500", time.Second, 2500 * time.Millisecond},
		{"trailer only", codes.ResourceExhausted, "3000", cliNoInfo, 3 * time.Second},
		{"RetryInfo only", codes.ResourceExhausted, "", 4 * time.Second, 4 * time.Second},
		{"zero pushback", codes.Unavailable, "0", cliNoInfo, 0},
		{"no pushback", codes.Unavailable, "", cliNoInfo, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &cliHealth{refuse: 2, code: tc.code, pushback: tc.pushback, retryInfo: tc.retryInfo}
			w := newCliWaits()
			client := cliGRPC(t, h, w.opts()...)
			ctx := WithPriority(context.Background(), shed.SheddablePlus)
			resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("Check: %v, %v", resp, err)
			}
			calls, prios := h.seen()
			if calls != 3 {
				t.Errorf("%d calls, want 3", calls)
			}
			if want := []string{"sheddable_plus", "sheddable_plus", "sheddable_plus"}; !slices.Equal(prios, want) {
				t.Errorf("server saw priorities %q, want %q", prios, want)
			}
			w.mustHaveWaited(t, 2, tc.min)
		})
	}
}

func TestClientUnaryDoesNotRetry(t *testing.T) {
	for _, tc := range []struct {
		name      string
		code      codes.Code
		pushback  string
		retryInfo time.Duration
		opts      []ClientOption
		deadline  time.Duration
	}{
		{"negative pushback", codes.Unavailable, "-1", time.Second, nil, 0},
		{"malformed pushback", codes.Unavailable, "soon", cliNoInfo, nil, 0},
		{"pushback with leading zero", codes.ResourceExhausted, "0100", cliNoInfo, nil, 0},
		{"pushback beyond int32", codes.Unavailable, "2147483648", cliNoInfo, nil, 0},
		{"negative RetryInfo", codes.Unavailable, "", -time.Second, nil, 0},
		{"other code", codes.Internal, "100", time.Second, nil, 0},
		{"pushback past the deadline", codes.Unavailable, "20000", cliNoInfo, nil, 10 * time.Second},
		{"pushback beyond the max delay", codes.Unavailable, "40000", cliNoInfo, nil, 0},
		{"one attempt", codes.Unavailable, "", cliNoInfo, []ClientOption{WithClientMaxAttempts(1)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &cliHealth{refuse: 1, code: tc.code, pushback: tc.pushback, retryInfo: tc.retryInfo}
			w := newCliWaits()
			client := cliGRPC(t, h, w.opts(tc.opts...)...)
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, w.clk.Now().Add(tc.deadline))
				defer cancel()
			}
			_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
			if status.Code(err) != tc.code {
				t.Errorf("error %v, want code %v", err, tc.code)
			}
			if calls, _ := h.seen(); calls != 1 || len(w.recorded()) != 0 {
				t.Errorf("%d calls and waits %v; want 1 call, no wait", calls, w.recorded())
			}
		})
	}
}

func TestClientUnaryBudget(t *testing.T) {
	const n, ratio, saved = 100, 0.1, 1
	h := &cliHealth{refuse: 1 << 30, code: codes.Unavailable, pushback: "10", retryInfo: cliNoInfo}
	budget, err := retry.NewBudget(ratio, saved)
	if err != nil {
		t.Fatal(err)
	}
	w := newCliWaits()
	client := cliGRPC(t, h, w.opts(WithClientBudget(budget), WithClientThrottle(nil), WithClientMaxAttempts(4))...)
	for range n {
		if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
			t.Fatalf("error %v, want UNAVAILABLE", err)
		}
	}
	calls, _ := h.seen()
	if retries := calls - n; retries > int(ratio*n)+saved || retries < int(ratio*n)-1 {
		t.Errorf("%d retries for %d calls; want about %v·%d, at most %d", retries, n, ratio, n, int(ratio*n)+saved)
	}
}

func TestClientUnaryThrottle(t *testing.T) {
	const n = 200
	h := &cliHealth{refuse: 1 << 30, code: codes.ResourceExhausted, retryInfo: cliNoInfo}
	w := newCliWaits()
	throttle, err := retry.NewThrottle[shed.Priority](retry.WithThrottleSeed(3), retry.WithThrottleClock(w.clk))
	if err != nil {
		t.Fatal(err)
	}
	client := cliGRPC(t, h, w.opts(WithClientThrottle(throttle), WithClientMaxAttempts(1))...)
	var local int
	for range n {
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		switch {
		case errors.Is(err, ErrClientThrottled):
			local++
			if status.Code(err) != codes.Unavailable {
				t.Errorf("local refusal %v: want code UNAVAILABLE", err)
			}
		case status.Code(err) != codes.ResourceExhausted:
			t.Fatalf("error %v", err)
		}
	}
	calls, _ := h.seen()
	if calls+local != n || local < n*3/4 {
		t.Errorf("%d sent, %d refused locally of %d: want most refused locally, none of them sent", calls, local, n)
	}
}

func TestClientUnaryContextEndsDuringWait(t *testing.T) {
	h := &cliHealth{refuse: 5, code: codes.Unavailable, pushback: "100", retryInfo: cliNoInfo}
	w := newCliWaits()
	ctx, cancel := context.WithCancel(context.Background())
	w.before = func(context.Context) error { cancel(); return context.Canceled }
	client := cliGRPC(t, h, w.opts()...)
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
	if calls, _ := h.seen(); status.Code(err) != codes.Canceled || calls != 1 {
		t.Errorf("error %v after %d calls; want CANCELED after 1", err, calls)
	}
}

func TestClientUnaryKeepsExplicitPriority(t *testing.T) {
	h := &cliHealth{retryInfo: cliNoInfo}
	client := cliGRPC(t, h, WithClientSeed(1))
	ctx := metadata.AppendToOutgoingContext(WithPriority(context.Background(), shed.Sheddable), PriorityMetadataKey, "critical_plus")
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, prios := h.seen(); !slices.Equal(prios, []string{"critical_plus"}) {
		t.Errorf("server saw priorities %q, want only the explicit critical_plus", prios)
	}
}

func TestClientStreamRealServer(t *testing.T) {
	// A stream is created and counted by the throttle: refused streams (the
	// server's UNAVAILABLE arrives on the first receive) raise the local
	// refusal probability, served ones lower it. Priority travels in the
	// metadata.
	h := &cliHealth{refuse: 10, code: codes.Unavailable, retryInfo: time.Second}
	w := newCliWaits()
	throttle, err := retry.NewThrottle[shed.Priority](retry.WithThrottleSeed(5), retry.WithThrottleClock(w.clk))
	if err != nil {
		t.Fatal(err)
	}
	client := cliGRPC(t, h, w.opts(WithClientThrottle(throttle))...)
	ctx := WithPriority(context.Background(), shed.Sheddable)
	watch := func() error {
		stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("status %v", resp.GetStatus())
		}
		return nil
	}
	for calls, _ := h.seen(); calls < 10; calls, _ = h.seen() {
		if err := watch(); status.Code(err) != codes.Unavailable {
			t.Fatalf("refused stream: %v, want UNAVAILABLE", err)
		}
	}
	if p := throttle.RejectProbability(shed.Sheddable); p < 0.5 {
		t.Errorf("after 10 refused streams, reject probability %v; want ≥ 0.5", p)
	}
	if len(w.recorded()) != 0 {
		t.Errorf("an open stream was retried: waits %v", w.recorded())
	}
	// Once the refusals have left the throttle's window, served streams keep
	// the refusal probability at zero.
	w.clk.Advance(2 * time.Minute)
	for range 10 {
		if err := watch(); err != nil {
			t.Fatal(err)
		}
	}
	if p := throttle.RejectProbability(shed.Sheddable); p != 0 {
		t.Errorf("after served streams, reject probability %v; want 0", p)
	}
	if _, prios := h.seen(); len(prios) == 0 || slices.ContainsFunc(prios, func(s string) bool { return s != "sheddable" }) {
		t.Errorf("server saw priorities %q, want all sheddable", prios)
	}
}

// cliFakeStream is a created stream that serves one message, then io.EOF.
type cliFakeStream struct {
	grpc.ClientStream
	sent bool
}

func (s *cliFakeStream) RecvMsg(any) error {
	if s.sent {
		return io.EOF
	}
	s.sent = true
	return nil
}

func TestClientStreamRetriesCreation(t *testing.T) {
	retryInfo, err := status.New(codes.Unavailable, "no connection").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		failures []error
		wantErr  codes.Code
		attempts int
		min      time.Duration
	}{
		{"UNAVAILABLE with RetryInfo", []error{retryInfo.Err(), retryInfo.Err()}, codes.OK, 3, 3 * time.Second},
		{"RESOURCE_EXHAUSTED", []error{status.Error(codes.ResourceExhausted, "quota")}, codes.OK, 2, 0},
		{"attempts used up", []error{retryInfo.Err(), retryInfo.Err(), retryInfo.Err()}, codes.Unavailable, 3, 3 * time.Second},
		{"not retryable", []error{status.Error(codes.PermissionDenied, "no")}, codes.PermissionDenied, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newCliWaits()
			interceptor, err := StreamClientInterceptor(w.opts()...)
			if err != nil {
				t.Fatal(err)
			}
			var attempts int
			var prios []string
			streamer := func(ctx context.Context, _ *grpc.StreamDesc, _ *grpc.ClientConn, _ string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
				md, _ := metadata.FromOutgoingContext(ctx)
				prios = append(prios, md.Get(PriorityMetadataKey)...)
				attempts++
				if attempts <= len(tc.failures) {
					return nil, tc.failures[attempts-1]
				}
				return &cliFakeStream{}, nil
			}
			ctx := WithPriority(context.Background(), shed.CriticalPlus)
			cs, err := interceptor(ctx, &grpc.StreamDesc{ServerStreams: true}, nil, "/svc/Method", streamer)
			if status.Code(err) != tc.wantErr || attempts != tc.attempts {
				t.Fatalf("error %v after %d attempts; want code %v after %d", err, attempts, tc.wantErr, tc.attempts)
			}
			if err == nil {
				if err := cs.RecvMsg(nil); err != nil {
					t.Errorf("RecvMsg: %v", err)
				}
				if err := cs.RecvMsg(nil); err != io.EOF {
					t.Errorf("RecvMsg at the end: %v, want io.EOF", err)
				}
			}
			if want := slices.Repeat([]string{"critical_plus"}, tc.attempts); !slices.Equal(prios, want) {
				t.Errorf("priorities %q, want %q", prios, want)
			}
			for _, d := range w.recorded() {
				if d <= 0 || d < tc.min {
					t.Errorf("waits %v: want each > 0 and ≥ %v", w.recorded(), tc.min)
				}
			}
		})
	}
}

func TestClientPushback(t *testing.T) {
	for _, tc := range []struct {
		in    []string
		want  time.Duration
		retry bool
	}{
		{nil, 0, true},
		{[]string{"0"}, 0, true},
		{[]string{"250"}, 250 * time.Millisecond, true},
		{[]string{"2147483647"}, 2147483647 * time.Millisecond, true},
		{[]string{"2147483648"}, 0, false},
		{[]string{"99999999999"}, 0, false},
		{[]string{"-1"}, 0, false},
		{[]string{"-0"}, 0, false},
		{[]string{"+5"}, 0, false},
		{[]string{"05"}, 0, false},
		{[]string{""}, 0, false},
		{[]string{" 5"}, 0, false},
		{[]string{"5ms"}, 0, false},
		{[]string{"1", "2"}, 0, false},
	} {
		got, retry := cliPushback(tc.in)
		if got != tc.want || retry != tc.retry {
			t.Errorf("cliPushback(%q) = %v, %v; want %v, %v", tc.in, got, retry, tc.want, tc.retry)
		}
	}
}

func TestClientVerdict(t *testing.T) {
	with := func(code codes.Code, d *durationpb.Duration) error {
		st, err := status.New(code, "x").WithDetails(&errdetails.RetryInfo{RetryDelay: d}, &errdetails.DebugInfo{Detail: "y"})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	trailer := func(v string) metadata.MD { return metadata.Pairs(RetryPushbackTrailer, v) }
	for _, tc := range []struct {
		name    string
		err     error
		trailer metadata.MD
		refused bool
		hint    time.Duration
		retry   bool
	}{
		{"ok", nil, nil, false, 0, false},
		{"not a status", errors.New("plain"), nil, false, 0, false},
		{"deadline", status.Error(codes.DeadlineExceeded, "late"), nil, false, 0, false},
		{"unavailable bare", status.Error(codes.Unavailable, "x"), nil, true, 0, true},
		{"retry info", with(codes.ResourceExhausted, durationpb.New(1500*time.Millisecond)), nil, true, 1500 * time.Millisecond, true},
		{"retry info and longer trailer", with(codes.Unavailable, durationpb.New(time.Second)), trailer("2000"), true, 2 * time.Second, true},
		{"invalid retry info", with(codes.Unavailable, &durationpb.Duration{Seconds: 1, Nanos: -5}), nil, true, 0, false},
		{"nil retry delay", with(codes.Unavailable, nil), trailer("10"), true, 10 * time.Millisecond, true},
		{"trailer says no", with(codes.Unavailable, durationpb.New(time.Second)), trailer("-1"), true, 0, false},
	} {
		refused, hint, retry := cliVerdict(tc.err, tc.trailer)
		if refused != tc.refused || hint != tc.hint || retry != tc.retry {
			t.Errorf("%s: cliVerdict = %v, %v, %v; want %v, %v, %v", tc.name, refused, hint, retry, tc.refused, tc.hint, tc.retry)
		}
	}
}
