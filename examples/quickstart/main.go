// Command quickstart is the README's quick start: an HTTP API and a gRPC
// server limited per client IP, then shed by priority through one adaptive
// gate. Run it with `go run ./examples/quickstart` and try
// `curl -i localhost:8080/api/`.
package main

import (
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/gradient"
	"github.com/sluicehq/sluice/interceptors"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

func main() {
	// The gate learns from latency how many requests the process can serve
	// at once; the shedder in front of it refuses the least important first.
	gate, err := adaptive.New(gradient.New(), adaptive.WithMaxLimit(1000))
	check(err)
	shedder, err := shed.New(gate, shed.WithReserve(0.2)) // keep 20% of the limit for critical work
	check(err)
	// Each client IP may send 100 requests a second.
	perIP, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 100, Period: time.Second})
	check(err)
	ip, err := interceptors.NewClientIP() // the peer's address: no proxy header is trusted
	check(err)

	// HTTP: 429 over the quota, 503 when shed, always with Retry-After.
	limitMW, err := interceptors.RateLimitMiddleware([]interceptors.HTTPQuota{{Name: "per-ip", Limiter: perIP, Key: ip.HTTPKey}})
	check(err)
	shedMW, err := interceptors.ShedMiddleware(shedder)
	check(err)
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	http.Handle("/api/", limitMW(shedMW(api))) // rate limits outside the gate

	// gRPC: RESOURCE_EXHAUSTED over the quota, UNAVAILABLE when shed.
	limit, err := interceptors.RateLimitInterceptors([]interceptors.GRPCQuota{{Name: "per-ip", Limiter: perIP, Key: ip.GRPCKey}})
	check(err)
	sh, err := interceptors.ShedInterceptors(shedder)
	check(err)
	srv := grpc.NewServer(
		grpc.InTapHandle(sh.Tap), // under CPU overload, refuses before the RPC costs anything
		grpc.ChainUnaryInterceptor(limit.Unary, sh.Unary),
		grpc.ChainStreamInterceptor(limit.Stream, sh.Stream))
	lis, err := net.Listen("tcp", "localhost:50051")
	check(err)
	go func() { log.Fatal(srv.Serve(lis)) }()

	log.Fatal(http.ListenAndServe("localhost:8080", nil))
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
