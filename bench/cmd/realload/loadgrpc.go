package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// grpcLoad drives one gRPC server with grpc-go directly.
type grpcLoad struct {
	addr    string
	timeout time.Duration
	conns   int // client connections the load spreads its calls over
}

// dial opens n client connections to the server.
func (l grpcLoad) dial(n int) ([]*grpc.ClientConn, error) {
	var cc []*grpc.ClientConn
	for range n {
		c, err := grpc.NewClient(l.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			closeAll(cc)
			return nil, err
		}
		c.Connect()
		cc = append(cc, c)
	}
	return cc, nil
}

func closeAll(cc []*grpc.ClientConn) {
	for _, c := range cc {
		_ = c.Close()
	}
}

// call makes one unary call with the client timeout as its deadline.
func (l grpcLoad) call(c *grpc.ClientConn) (time.Duration, outcome) {
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	start := time.Now()
	err := c.Invoke(ctx, workMethod, &emptypb.Empty{}, new(wrapperspb.UInt32Value))
	return time.Since(start), classifyGRPC(err)
}

// classifyGRPC sorts a call's error: UNAVAILABLE and RESOURCE_EXHAUSTED are
// refusals, DEADLINE_EXCEEDED a timeout.
func classifyGRPC(err error) outcome {
	if err == nil {
		return ok
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted:
		return refused
	case codes.DeadlineExceeded:
		return timeout
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return timeout
	}
	return failed
}

// collector gathers the samples of many goroutines.
type collector struct {
	mu  sync.Mutex
	out []sample
}

// add appends samples, safe for concurrent use.
func (c *collector) add(s ...sample) {
	c.mu.Lock()
	c.out = append(c.out, s...)
	c.mu.Unlock()
}

// withConns dials the load's l.conns connections (at least one), runs f on
// them, closes them and returns f's samples.
func (l grpcLoad) withConns(f func(cc []*grpc.ClientConn) []sample) ([]sample, error) {
	cc, err := l.dial(max(l.conns, 1))
	if err != nil {
		return nil, err
	}
	defer closeAll(cc)
	return f(cc), nil
}

// attack is the open-loop load: one goroutine per call, started at the
// profile's pace whether or not earlier calls have been answered, the calls
// spread round-robin over l.conns connections. It returns once every call
// has ended.
func (l grpcLoad) attack(p profile) ([]sample, error) {
	return l.withConns(func(cc []*grpc.ClientConn) []sample {
		var (
			col collector
			wg  sync.WaitGroup
		)
		start := time.Now()
		for hits := uint64(0); ; hits++ {
			wait, stop := p.Pace(time.Since(start), hits)
			if stop {
				break
			}
			if wait > 0 {
				time.Sleep(wait)
			}
			at := time.Since(start)
			c := cc[hits%uint64(len(cc))]
			wg.Go(func() {
				lat, o := l.call(c)
				col.add(sample{at: at, lat: lat, out: o})
			})
		}
		wg.Wait()
		return col.out
	})
}

// closedLoop runs workers callers, each making its next call as soon as
// the previous one ends, for du; it measures capacity.
func (l grpcLoad) closedLoop(workers int, du time.Duration) ([]sample, error) {
	return l.withConns(func(cc []*grpc.ClientConn) []sample {
		var (
			col  collector
			wg   sync.WaitGroup
			stop atomic.Bool
		)
		start := time.Now()
		for i := range workers {
			c := cc[i%len(cc)]
			wg.Go(func() {
				var mine []sample
				for !stop.Load() {
					at := time.Since(start)
					lat, o := l.call(c)
					mine = append(mine, sample{at: at, lat: lat, out: o})
				}
				col.add(mine...)
			})
		}
		time.Sleep(du)
		stop.Store(true)
		wg.Wait()
		return col.out
	})
}

// lone makes n calls one at a time on a fresh connection.
func (l grpcLoad) lone(n int) ([]sample, error) {
	cc, err := l.dial(1)
	if err != nil {
		return nil, err
	}
	defer closeAll(cc)
	out := make([]sample, 0, n)
	for range n {
		lat, o := l.call(cc[0])
		out = append(out, sample{lat: lat, out: o})
	}
	return out, nil
}
