package interceptors_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/gradient"
	"github.com/sluicehq/sluice/interceptors"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// srvExampleClock is the clock of the examples: a manual one, so that their
// output does not depend on when they run. Production code leaves WithClock
// unset.
func srvExampleClock() *clock.Manual {
	return clock.NewManual(time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC))
}

// The wiring of the package doc: a gRPC server and an HTTP handler limited
// per client IP, then shed by priority through one adaptive gate, and their
// clients. (Compiled, not run: it listens on a port.)
func Example() {
	gate, err := adaptive.New(gradient.New())
	if err != nil {
		panic(err)
	}
	shedder, err := shed.New(gate)
	if err != nil {
		panic(err)
	}
	perIP, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 100, Period: time.Second})
	if err != nil {
		panic(err)
	}
	ip, err := interceptors.NewClientIP(interceptors.WithIPTrustedProxies("10.0.0.0/8"))
	if err != nil {
		panic(err)
	}

	// gRPC: rate limits outside the shedder, so that a refusal spends no token.
	limit, err := interceptors.RateLimitInterceptors([]interceptors.GRPCQuota{{Name: "per-ip", Limiter: perIP, Key: ip.GRPCKey}})
	if err != nil {
		panic(err)
	}
	sh, err := interceptors.ShedInterceptors(shedder)
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(
		grpc.InTapHandle(sh.Tap), // under CPU overload, refuses before the RPC costs anything
		grpc.ChainUnaryInterceptor(limit.Unary, sh.Unary),
		grpc.ChainStreamInterceptor(limit.Stream, sh.Stream),
	)
	lis, err := net.Listen("tcp", "localhost:50051")
	if err != nil {
		panic(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	// HTTP: the same guards as middleware.
	limitMW, err := interceptors.RateLimitMiddleware([]interceptors.HTTPQuota{{Name: "per-ip", Limiter: perIP, Key: ip.HTTPKey}})
	if err != nil {
		panic(err)
	}
	shedMW, err := interceptors.ShedMiddleware(shedder)
	if err != nil {
		panic(err)
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux := http.NewServeMux()
	mux.Handle("/api/", limitMW(shedMW(api)))
	go func() { _ = http.ListenAndServe("localhost:8080", mux) }()

	// The clients: throttle, retry budget, backoff honouring the server.
	unary, err := interceptors.UnaryClientInterceptor()
	if err != nil {
		panic(err)
	}
	conn, err := grpc.NewClient("localhost:50051", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUnaryInterceptor(unary))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	tr, err := interceptors.NewTransport(nil)
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: tr}
	ctx := interceptors.WithPriority(context.Background(), shed.Sheddable)
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://localhost:8080/api/", nil)
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
	}
}

// A route limited per client IP and per API key. Every response carries the
// IETF RateLimit-Policy and RateLimit fields; a refusal is a 429 with
// Retry-After and a problem+json body.
func ExampleRateLimitMiddleware() {
	clk := srvExampleClock()
	perIP, err := ratelimit.New(ratelimit.FixedWindow, ratelimit.Limit{Rate: 100, Period: time.Minute}, ratelimit.WithClock(clk))
	if err != nil {
		panic(err)
	}
	perKey, err := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 1, Period: 10 * time.Second, Burst: 2}, ratelimit.WithClock(clk))
	if err != nil {
		panic(err)
	}
	ip, err := interceptors.NewClientIP(interceptors.WithIPTrustedProxies("10.0.0.0/8"))
	if err != nil {
		panic(err)
	}
	apiKey, err := interceptors.APIKey("Authorization")
	if err != nil {
		panic(err)
	}
	limit, err := interceptors.RateLimitMiddleware([]interceptors.HTTPQuota{
		{Name: "per-ip", Limiter: perIP, Key: ip.HTTPKey},
		{Name: "per-key", Limiter: perKey, Key: apiKey},
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(limit(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello\n")
	})))
	defer srv.Close()

	for range 3 {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("Authorization", "Bearer s3cr3t")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.Status)
		fmt.Println("  RateLimit-Policy:", resp.Header.Get("RateLimit-Policy"))
		fmt.Println("  RateLimit:", resp.Header.Get("RateLimit"))
		if resp.StatusCode != http.StatusOK {
			fmt.Println("  Retry-After:", resp.Header.Get("Retry-After"))
			fmt.Print("  ", string(body))
		}
	}
	// Output:
	// 200 OK
	//   RateLimit-Policy: "per-ip";q=100;w=60, "per-key";q=2;w=20
	//   RateLimit: "per-ip";r=99;t=60, "per-key";r=1;t=10
	// 200 OK
	//   RateLimit-Policy: "per-ip";q=100;w=60, "per-key";q=2;w=20
	//   RateLimit: "per-ip";r=98;t=60, "per-key";r=0;t=20
	// 429 Too Many Requests
	//   RateLimit-Policy: "per-ip";q=100;w=60, "per-key";q=2;w=20
	//   RateLimit: "per-ip";r=98;t=60, "per-key";r=0;t=10
	//   Retry-After: 10
	//   {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota exceeded","status":429,"detail":"The request exceeds the quota of the policies listed; retry after the time given.","violated-policies":["per-key"],"retry-after":10}
}

// The legacy X-RateLimit-* fields next to the IETF ones, for clients written
// against GitHub's API or ulule/limiter: the tightest quota's limit, what it
// has left, and when it can be counted on again (Unix seconds).
func ExampleWithLegacyHeaders() {
	clk := srvExampleClock() // 2026-01-02 03:04:00 UTC
	perKey, err := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 1, Period: 10 * time.Second, Burst: 2}, ratelimit.WithClock(clk))
	if err != nil {
		panic(err)
	}
	apiKey, err := interceptors.APIKey("Authorization")
	if err != nil {
		panic(err)
	}
	limit, err := interceptors.RateLimitMiddleware([]interceptors.HTTPQuota{{Name: "per-key", Limiter: perKey, Key: apiKey}},
		interceptors.WithLegacyHeaders(true), interceptors.WithClock(clk))
	if err != nil {
		panic(err)
	}
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello\n") }))
	for range 3 {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("Authorization", "Bearer s3cr3t")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		reset, err := strconv.ParseInt(rec.Header().Get("X-RateLimit-Reset"), 10, 64)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%d limit=%s remaining=%s reset=%s (in %v)\n", rec.Code,
			rec.Header().Get("X-RateLimit-Limit"), rec.Header().Get("X-RateLimit-Remaining"),
			time.Unix(reset, 0).UTC().Format(time.TimeOnly), time.Unix(reset, 0).Sub(clk.Now()))
	}
	// Output:
	// 200 limit=2 remaining=1 reset=03:04:10 (in 10s)
	// 200 limit=2 remaining=0 reset=03:04:20 (in 20s)
	// 429 limit=2 remaining=0 reset=03:04:10 (in 10s)
}

// The adaptive gate as middleware. Here the gate admits one request at a
// time, and the handler makes a second request while it holds the slot.
func ExampleGateMiddleware() {
	gate, err := adaptive.New(adaptive.Fixed(1))
	if err != nil {
		panic(err)
	}
	mw, err := interceptors.GateMiddleware(gate, interceptors.WithOverloadRetry(2*time.Second))
	if err != nil {
		panic(err)
	}
	var h http.Handler
	h = mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/outer" {
			inner := httptest.NewRecorder()
			h.ServeHTTP(inner, httptest.NewRequest("GET", "/inner", nil))
			fmt.Println("inner:", inner.Code, "Retry-After", inner.Header().Get("Retry-After"), inner.Header().Get("Content-Type"))
		}
	}))
	outer := httptest.NewRecorder()
	h.ServeHTTP(outer, httptest.NewRequest("GET", "/outer", nil))
	fmt.Println("outer:", outer.Code, "in flight now:", gate.InFlight())
	// Output:
	// inner: 503 Retry-After 2 application/problem+json
	// outer: 200 in flight now: 0
}

// The priority shedder as middleware. A quarter of the gate is reserved for
// critical traffic: with three of four slots taken, a sheddable request is
// refused while a critical one still gets in.
func ExampleShedMiddleware() {
	gate, err := adaptive.New(adaptive.Fixed(4))
	if err != nil {
		panic(err)
	}
	shedder, err := shed.New(gate, shed.WithReserve(0.25))
	if err != nil {
		panic(err)
	}
	mw, err := interceptors.ShedMiddleware(shedder, interceptors.WithHTTPUser(func(r *http.Request) uint64 {
		return shed.UserHash(r.Header.Get("X-User"))
	}))
	if err != nil {
		panic(err)
	}
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 3 { // hold three slots
		tok, _ := gate.TryAcquire()
		defer tok.Success()
	}
	// Critical work arrives, so the reserve keeps room for it.
	for _, p := range []shed.Priority{shed.Critical, shed.Sheddable} {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set(interceptors.PriorityHeader, p.String())
		req.Header.Set("X-User", "alice")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(p, rec.Code)
	}
	// Output:
	// critical 200
	// sheddable 503
}

// srvHealth answers every health check: the example service.
type srvHealth struct {
	healthpb.UnimplementedHealthServer
}

func (srvHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// A gRPC server limited per tenant (from metadata), chained in front of
// the adaptive gate. The refusal carries RetryInfo and the pushback trailer.
func ExampleRateLimitInterceptors() {
	clk := srvExampleClock()
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 2, Period: time.Second}, ratelimit.WithClock(clk))
	if err != nil {
		panic(err)
	}
	tenant, err := interceptors.MetadataKey("tenant")
	if err != nil {
		panic(err)
	}
	rl, err := interceptors.RateLimitInterceptors([]interceptors.GRPCQuota{{Name: "tenant", Limiter: lim, Key: tenant}})
	if err != nil {
		panic(err)
	}
	gate, err := adaptive.New(adaptive.Fixed(100))
	if err != nil {
		panic(err)
	}
	g, err := interceptors.GateInterceptors(gate)
	if err != nil {
		panic(err)
	}
	s := grpc.NewServer(
		grpc.InTapHandle(g.Tap),
		grpc.ChainUnaryInterceptor(rl.Unary, g.Unary),
		grpc.ChainStreamInterceptor(rl.Stream, g.Stream),
	)
	healthpb.RegisterHealthServer(s, srvHealth{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() { _ = s.Serve(lis) }()
	defer s.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	client := healthpb.NewHealthClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "tenant", "acme")
	for range 3 {
		var trailer metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
		st := status.Convert(err)
		fmt.Print(st.Code())
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				fmt.Print(" RetryInfo ", ri.GetRetryDelay().AsDuration())
			}
		}
		if v := trailer.Get("grpc-retry-pushback-ms"); len(v) > 0 {
			fmt.Print(" pushback ", v[0], "ms")
		}
		fmt.Println()
	}
	// Output:
	// OK
	// OK
	// ResourceExhausted RetryInfo 500ms pushback 500ms
}

// The adaptive gate as gRPC interceptors. Outside a server the interceptor
// can be called directly: here the handler makes a second call while it
// holds the gate's only slot.
func ExampleGateInterceptors() {
	gate, err := adaptive.New(adaptive.Fixed(1))
	if err != nil {
		panic(err)
	}
	g, err := interceptors.GateInterceptors(gate, interceptors.WithOverloadRetry(300*time.Millisecond))
	if err != nil {
		panic(err)
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/example.Service/Method"}
	var handler grpc.UnaryHandler
	handler = func(ctx context.Context, req any) (any, error) {
		if req == "outer" {
			_, err := g.Unary(ctx, "inner", info, handler)
			st := status.Convert(err)
			fmt.Println("inner:", st.Code(), st.Message())
		}
		return "done", nil
	}
	resp, err := g.Unary(context.Background(), "outer", info, handler)
	fmt.Println("outer:", resp, err, "in flight now:", gate.InFlight())
	// Output:
	// inner: Unavailable sluice: server at capacity
	// outer: done <nil> in flight now: 0
}

// The priority shedder as gRPC interceptors: the priority travels in the
// sluice-priority metadata key (set by the client interceptors).
func ExampleShedInterceptors() {
	gate, err := adaptive.New(adaptive.Fixed(2))
	if err != nil {
		panic(err)
	}
	shedder, err := shed.New(gate, shed.WithReserve(0.5))
	if err != nil {
		panic(err)
	}
	ic, err := interceptors.ShedInterceptors(shedder)
	if err != nil {
		panic(err)
	}
	tok, _ := gate.TryAcquire() // half the gate is busy
	defer tok.Success()
	info := &grpc.UnaryServerInfo{FullMethod: "/example.Service/Method"}
	ok := func(context.Context, any) (any, error) { return "ok", nil }
	// Critical work arrives, so the reserve keeps room for it: sheddable
	// work may not take the gate's second half.
	for _, p := range []string{"critical", "sheddable"} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(interceptors.PriorityMetadataKey, p))
		_, err := ic.Unary(ctx, nil, info, ok)
		fmt.Println(p, status.Code(err))
	}
	// Output:
	// critical OK
	// sheddable Unavailable
}

// Finding the client behind trusted proxies: X-Forwarded-For is read from
// the right, skipping trusted hops, and only when the direct peer is one of
// them. IPv6 clients are keyed by their /64.
func ExampleNewClientIP() {
	ip, err := interceptors.NewClientIP(interceptors.WithIPTrustedProxies("10.0.0.0/8"))
	if err != nil {
		panic(err)
	}
	for _, tc := range []struct{ peer, xff string }{
		{"10.0.0.5:4000", "6.6.6.6, 198.51.100.7, 10.0.0.9"}, // 6.6.6.6 was written by the client: not read
		{"203.0.113.8:4000", "198.51.100.7"},                 // the peer is no proxy of ours: header ignored
		{"10.0.0.5:4000", "2001:db8:1:2::99"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.peer
		r.Header.Set("X-Forwarded-For", tc.xff)
		key, err := ip.HTTPKey(r)
		fmt.Println(key, err)
	}
	// Output:
	// ip:198.51.100.7 <nil>
	// ip:203.0.113.8 <nil>
	// ip:2001:db8:1:2::/64 <nil>
}

// Keying on the authenticated user when there is one, and on the client IP
// otherwise.
func ExampleFirstHTTPKey() {
	type userKey struct{}
	user, _ := interceptors.UserKey(func(ctx context.Context) (string, bool) {
		id, ok := ctx.Value(userKey{}).(string)
		return id, ok
	})
	ip, err := interceptors.NewClientIP()
	if err != nil {
		panic(err)
	}
	key, err := interceptors.FirstHTTPKey(user, ip.HTTPKey)
	if err != nil {
		panic(err)
	}
	anon := httptest.NewRequest("GET", "/", nil)
	fmt.Println(key(anon))
	alice := anon.WithContext(context.WithValue(anon.Context(), userKey{}, "alice"))
	fmt.Println(key(alice))
	// Output:
	// ip:192.0.2.1 <nil>
	// user:alice <nil>
}

// API keys are hashed before they become rate-limit keys, so secrets never
// reach the limiter's store.
func ExampleAPIKey() {
	key, err := interceptors.APIKey("Authorization")
	if err != nil {
		panic(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer s3cr3t")
	k, err := key(r)
	fmt.Println(len(k), k[:7], err)
	r.Header.Add("Authorization", "Bearer another")
	_, err = key(r)
	fmt.Println(err)
	// Output:
	// 39 apikey: <nil>
	// sluice/interceptors: malformed rate-limit key
}

// A server takes one tap handle: a tap of its own (here, one that refuses
// RPCs without an authorization header before anything else runs) and the
// gate's are installed as one chain.
func ExampleChainTapHandles() {
	authorized := func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if len(info.Header.Get("authorization")) == 0 {
			return ctx, status.Error(codes.Unauthenticated, "no credentials")
		}
		return ctx, nil
	}
	gate, err := adaptive.New(gradient.New())
	if err != nil {
		panic(err)
	}
	if g, err := interceptors.GateInterceptors(gate); err == nil {
		srv := grpc.NewServer(
			grpc.InTapHandle(interceptors.ChainTapHandles(authorized, g.Tap)),
			grpc.ChainUnaryInterceptor(g.Unary),
			grpc.ChainStreamInterceptor(g.Stream),
		)
		srv.Stop()
	}
}
