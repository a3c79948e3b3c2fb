package interceptors_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/interceptors"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/shed"
)

// cliPrintWait stands in for the real wait in these examples: it prints the
// delay instead of sleeping. Production code leaves WithClientWait unset.
func cliPrintWait(_ context.Context, d time.Duration) error {
	fmt.Println("waiting", d)
	return nil
}

func ExampleWithPriority() {
	ctx := interceptors.WithPriority(context.Background(), shed.SheddablePlus)
	p, ok := interceptors.PriorityFrom(ctx)
	fmt.Println(p, ok)
	// Output: sheddable_plus true
}

func ExampleNewTransport() {
	// A server that is overloaded at first and asks for two seconds.
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "2")
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "served a %s request\n", r.Header.Get(interceptors.PriorityHeader))
	}))
	defer srv.Close()

	tr, err := interceptors.NewTransport(&http.Transport{},
		interceptors.WithClientMaxAttempts(3),
		interceptors.WithClientBackoff(retry.Backoff{Base: 100 * time.Millisecond, Max: 5 * time.Second}),
		interceptors.WithClientWait(cliPrintWait))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	ctx := interceptors.WithPriority(context.Background(), shed.Sheddable)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(resp.Status, ": ", string(body))
	// Output:
	// waiting 2s
	// 200 OK: served a sheddable request
}

// cliAlways503 is a RoundTripper standing in for a server that refuses
// everything.
type cliAlways503 struct{ sent int }

func (a *cliAlways503) RoundTrip(r *http.Request) (*http.Response, error) {
	a.sent++
	return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable",
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

func ExampleErrClientThrottled() {
	// Once the server refuses most requests, the client throttle refuses
	// most of them locally, without sending them.
	throttle, err := retry.NewThrottle[shed.Priority](retry.WithThrottleSeed(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	server := &cliAlways503{}
	tr, err := interceptors.NewTransport(server,
		interceptors.WithClientThrottle(throttle), interceptors.WithClientMaxAttempts(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: tr}
	var local int
	for range 100 {
		resp, err := client.Get("http://backend.example/")
		if errors.Is(err, interceptors.ErrClientThrottled) {
			local++
			continue
		}
		resp.Body.Close()
	}
	fmt.Printf("sent %d, refused locally %d\n", server.sent, local)
	// Output: sent 5, refused locally 95
}

// cliRoundTripFunc adapts a function to http.RoundTripper.
type cliRoundTripFunc func(*http.Request) (*http.Response, error)

func (f cliRoundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func ExampleClientWait() {
	// A test makes the client's time virtual: a manual clock, and a wait
	// that records each delay and moves the clock instead of sleeping.
	clk := clock.NewManual(time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC))
	var waits []time.Duration
	wait := func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		clk.Advance(d)
		return nil
	}
	// A stand-in server that first asks, with an HTTP-date, to come back in
	// 20 seconds.
	var calls int
	server := cliRoundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		resp := &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{},
			Body: io.NopCloser(strings.NewReader("")), Request: r}
		if calls == 1 {
			resp.StatusCode, resp.Status = http.StatusTooManyRequests, "429 Too Many Requests"
			resp.Header.Set("Retry-After", clk.Now().Add(20*time.Second).Format(http.TimeFormat))
		}
		return resp, nil
	})
	tr, err := interceptors.NewTransport(server,
		interceptors.WithClientWait(wait), interceptors.WithClientClock(clk), interceptors.WithClientSeed(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := (&http.Client{Transport: tr}).Get("http://backend.example/")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status, "after waiting", waits, "until", clk.Now().Format(time.TimeOnly))
	// Output: 200 OK after waiting [20s] until 12:00:20
}

// cliExampleHealth is a health service that refuses its first call with
// UNAVAILABLE and a pushback of 1.5s, and reports the caller's priority.
type cliExampleHealth struct {
	healthpb.UnimplementedHealthServer
	calls atomic.Int32
}

func (h *cliExampleHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if h.calls.Add(1) == 1 {
		grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", "1500"))
		return nil, status.Error(codes.Unavailable, "overloaded")
	}
	md, _ := metadata.FromIncomingContext(ctx)
	fmt.Println("server: priority", md.Get(interceptors.PriorityMetadataKey))
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (h *cliExampleHealth) Watch(_ *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	fmt.Println("server: priority", md.Get(interceptors.PriorityMetadataKey))
	return stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

// cliServeHealth starts the example's health server on 127.0.0.1:0 and
// returns its address and a function that stops it.
func cliServeHealth() (string, func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, &cliExampleHealth{})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	return lis.Addr().String(), func() { srv.Stop(); <-done }
}

func ExampleUnaryClientInterceptor() {
	addr, stop := cliServeHealth()
	defer stop()

	// One budget and one throttle for everything this client sends to the
	// backend.
	budget, err := retry.NewBudget(0.1, 10)
	if err != nil {
		panic(err)
	}
	throttle, err := retry.NewThrottle[shed.Priority]()
	if err != nil {
		panic(err)
	}
	unary, err := interceptors.UnaryClientInterceptor(
		interceptors.WithClientBudget(budget), interceptors.WithClientThrottle(throttle),
		interceptors.WithClientWait(cliPrintWait))
	if err != nil {
		fmt.Println(err)
		return
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(unary))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()

	// A new budget starts empty; earn a retry first (a long-lived client
	// earns its retries from its traffic).
	for range 10 {
		budget.Request()
	}
	ctx := interceptors.WithPriority(context.Background(), shed.CriticalPlus)
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("client:", resp.GetStatus())
	// Output:
	// waiting 1.5s
	// server: priority [critical_plus]
	// client: SERVING
}

func ExampleStreamClientInterceptor() {
	addr, stop := cliServeHealth()
	defer stop()

	stream, err := interceptors.StreamClientInterceptor(interceptors.WithClientMaxAttempts(2))
	if err != nil {
		fmt.Println(err)
		return
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStreamInterceptor(stream))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()

	ctx := interceptors.WithPriority(context.Background(), shed.Sheddable)
	watch, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := watch.Recv()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("client:", resp.GetStatus())
	// Output:
	// server: priority [sheddable]
	// client: SERVING
}
