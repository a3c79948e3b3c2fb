package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/interceptors"
)

// serverEnv names the environment variable that turns this binary into a
// server: it holds the serverConfig as JSON. The harness re-executes its own
// binary (os.Executable) with it set and GOMAXPROCS set to the cores under
// test.
const serverEnv = "SLUICE_REALLOAD_SERVER"

// serverConfig tells a server process what to serve.
type serverConfig struct {
	Transport   string  `json:"transport"`    // "http" or "grpc"
	Work        string  `json:"work"`         // a workload name (parseWorkload)
	Contender   string  `json:"contender"`    // a contender name
	ItersPerMs  float64 `json:"iters_per_ms"` // spin rounds per ms of CPU; 0: the server's own calibration
	CalibTrials int     `json:"calib_trials"` // 20 ms trials of the server's own calibration (default 3)
	Refuse      string  `json:"refuse"`       // a refusal path's name: guard with it instead of the contender
	Trace       string  `json:"trace"`        // a file for the server's trace (traceServer); "": none
}

// serverHello is the one line of JSON a server prints on stdout once it
// listens.
type serverHello struct {
	Addr       string  `json:"addr"`         // the service (HTTP or gRPC)
	Admin      string  `json:"admin"`        // HTTP: GET /stats answers serverStats
	OwnCalib   float64 `json:"own_calib"`    // spin rounds per ms this process measured
	ItersPerMs float64 `json:"iters_per_ms"` // the rate it uses
	Procs      int     `json:"gomaxprocs"`
}

// serverStats is the admin endpoint's answer: cumulative counters since
// the process started.
type serverStats struct {
	CPU      int64 `json:"cpu_us"`   // user+system CPU of the whole process, µs
	Served   int64 `json:"served"`   // requests whose handler ran to the end
	Refused  int64 `json:"refused"`  // requests answered without running the handler (503 / UNAVAILABLE)
	InFlight int64 `json:"inflight"` // requests inside the outermost wrapper now
}

// counters are the server's request counts.
type counters struct {
	served, done, inflight atomic.Int64
}

func (c *counters) stats() serverStats {
	served, done := c.served.Load(), c.done.Load()
	return serverStats{CPU: processCPU().Microseconds(), Served: served, Refused: done - served, InFlight: c.inflight.Load()}
}

// serverMain runs a server process as the serverEnv variable says and
// returns the process's exit code. It exits when its standard input closes
// (the harness ended it, or died).
func serverMain() int {
	var cfg serverConfig
	if err := json.Unmarshal([]byte(os.Getenv(serverEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "realload server:", err)
		return 2
	}
	if err := serve(cfg, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "realload server:", err)
		return 1
	}
	return 0
}

// serve runs the server until stdin reaches EOF, having printed its
// serverHello to out.
func serve(cfg serverConfig, stdin io.Reader, out io.Writer) error {
	w, err := parseWorkload(cfg.Work)
	if err != nil {
		return err
	}
	guardHTTP, guardGRPC, err := guards(cfg)
	if err != nil {
		return err
	}
	trials := cfg.CalibTrials
	if trials <= 0 {
		trials = 3
	}
	own := calibrate(trials, 20*time.Millisecond)
	rate := cfg.ItersPerMs
	if rate <= 0 {
		rate = own
	}
	iters := int(rate * float64(w.cpu) / float64(time.Millisecond))
	var n counters
	work := func() byte {
		var b byte
		if w.sleep > 0 {
			time.Sleep(w.sleep)
		} else {
			b = spin(iters)
		}
		n.served.Add(1)
		return b
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	adminLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	admin := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(n.stats())
	})}
	go func() { _ = admin.Serve(adminLn) }()

	var stop func()
	switch cfg.Transport {
	case "http":
		h := http.Handler(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			b := work()
			_, _ = fmt.Fprintf(rw, "%02x\n", b)
		}))
		if guardHTTP != nil {
			mw, err := guardHTTP()
			if err != nil {
				return err
			}
			h = mw(h)
		}
		inner := h
		srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			n.inflight.Add(1)
			defer func() { n.inflight.Add(-1); n.done.Add(1) }()
			inner.ServeHTTP(rw, r)
		})}
		go func() { _ = srv.Serve(ln) }()
		stop = func() { _ = srv.Close() }
	case "grpc":
		count := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			n.inflight.Add(1)
			defer func() { n.inflight.Add(-1); n.done.Add(1) }()
			return handler(ctx, req)
		}
		chain := []grpc.UnaryServerInterceptor{count}
		var opts []grpc.ServerOption
		if guardGRPC != nil {
			ic, err := guardGRPC()
			if err != nil {
				return err
			}
			chain = append(chain, ic.Unary)
			if ic.Tap != nil {
				// The tap refuses before count sees the RPC: count it.
				opts = append(opts, grpc.InTapHandle(func(ctx context.Context, info *tap.Info) (context.Context, error) {
					ctx, err := ic.Tap(ctx, info)
					if err != nil {
						n.done.Add(1)
					}
					return ctx, err
				}))
			}
		}
		srv := grpc.NewServer(append(opts, grpc.ChainUnaryInterceptor(chain...))...)
		srv.RegisterService(&workServiceDesc, workFunc(work))
		go func() { _ = srv.Serve(ln) }()
		stop = srv.Stop
	default:
		return fmt.Errorf("transport %q: want http or grpc", cfg.Transport)
	}
	if cfg.Trace != "" {
		f, err := os.Create(cfg.Trace)
		if err != nil {
			return err
		}
		defer f.Close()
		done := make(chan struct{})
		defer close(done)
		go traceServer(f, &n, done)
	}
	hello := serverHello{Addr: ln.Addr().String(), Admin: adminLn.Addr().String(), OwnCalib: own, ItersPerMs: rate, Procs: runtime.GOMAXPROCS(0)}
	if err := json.NewEncoder(out).Encode(hello); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, bufio.NewReader(stdin))
	stop()
	_ = admin.Close()
	if errors.Is(err, os.ErrClosed) {
		err = nil
	}
	return err
}

// guards returns the constructors of the guard cfg asks for: a refusal
// path's, or else a contender's.
func guards(cfg serverConfig) (func() (func(http.Handler) http.Handler, error), func() (interceptors.GRPCInterceptors, error), error) {
	if cfg.Refuse != "" {
		r, err := findRefusalPath(cfg.Refuse)
		return r.http, r.grpc, err
	}
	c, err := findContender(cfg.Contender)
	return c.http, c.grpc, err
}

// workFunc is the gRPC service's implementation: it does the work and
// answers its byte.
type workFunc func() byte

// workMethod is the gRPC method the load calls.
const workMethod = "/realload.Work/Do"

// workServiceDesc describes the gRPC service by hand (no protoc): one unary
// method that takes google.protobuf.Empty and answers a
// google.protobuf.UInt32Value.
var workServiceDesc = grpc.ServiceDesc{
	ServiceName: "realload.Work",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Do",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			do := func(context.Context, any) (any, error) {
				return wrapperspb.UInt32(uint32(srv.(workFunc)())), nil
			}
			if interceptor == nil {
				return do(ctx, in)
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: workMethod}, do)
		},
	}},
	Metadata: "realload.proto",
}
