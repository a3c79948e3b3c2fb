package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Failing fast. A Redis that is gone usually refuses connections outright,
// but go-redis does not say so at once: it retries a failed dial (5 times,
// 100ms apart, in a goroutine of its own) and a failed command (3 times,
// with backoff), so a call would wait out the store's timeout. The store
// therefore watches the client's dials (a dial hook, on a *redis.Client)
// and, at the first refused connection, opens the circuit breaker and
// cancels the calls in flight: every one of them, and every call after,
// is decided by the failure policy at once. A refused connection that
// reaches the store as a call's error does the same.
//
// While the breaker is open no call waits on Redis: after each cool-down
// one probe (a PING bounded by the store's timeout) runs in a goroutine of
// its own, and closes the breaker when Redis answers. After a run of failed
// dials go-redis itself redials at most once a second (its pool stops
// dialing after PoolSize failed dials until a background redial succeeds),
// so decisions come back to Redis within the cool-down of its return, or
// within about a second and a cool-down when that pacing applies.

// abort is one epoch of the calls in flight: a refused connection cancels
// it (with the refusal as cause) and starts the next.
type abort struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newAbort() *abort {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &abort{ctx, cancel}
}

// call is one call to Redis: its context (the caller's, bounded by the
// store's timeout and cancelled by a refused connection).
type call struct {
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() bool
	ab     *abort
}

// begin starts a call under ctx.
func (s *Store) begin(ctx context.Context) call {
	c := call{ab: s.abort.Load()}
	if dl, ok := ctx.Deadline(); s.timeout > 0 && (!ok || time.Until(dl) > s.timeout) {
		c.ctx, c.cancel = context.WithTimeout(ctx, s.timeout)
	} else {
		c.ctx, c.cancel = context.WithCancel(ctx)
	}
	c.stop = context.AfterFunc(c.ab.ctx, c.cancel)
	return c
}

// end releases the call's context.
func (c call) end() {
	c.stop()
	c.cancel()
}

// callFailed classifies the failure err of c, whose caller's context is
// still live (a failure of Redis, not the caller giving up), tells the
// breaker, and returns the cause: the refused connection that cancelled the
// call, or err wrapped with the timeout and context.DeadlineExceeded when
// the call ran out of the store's timeout (go-redis then reports a read or
// write "i/o timeout", or the context's error).
func (s *Store) callFailed(c call, err error) error {
	cause := err
	switch {
	case c.ab.ctx.Err() != nil:
		cause = fmt.Errorf("sluice/redisstore: call abandoned: %w", context.Cause(c.ab.ctx))
	case pastDeadline(c.ctx) || errors.Is(err, context.DeadlineExceeded):
		cause = s.timedOut(err)
	}
	if refusedConn(cause) {
		s.refused(cause)
	} else {
		s.brk.failure(time.Now())
	}
	return cause
}

// timedOut is the cause of a call that ran out of the store's timeout: err
// (go-redis's "i/o timeout", or the context's own error) said so, and
// wrapping context.DeadlineExceeded in every case.
func (s *Store) timedOut(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("sluice/redisstore: no answer within the timeout (%v): %w", s.timeout, err)
	}
	return fmt.Errorf("sluice/redisstore: no answer within the timeout (%v): %w (%w)", s.timeout, context.DeadlineExceeded, err)
}

// pastDeadline reports whether ctx's deadline has passed. go-redis sets its
// connection's deadline from the context's, so a read may time out an
// instant before the context's own timer marks it done.
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// refusedConn reports whether err is a connection that was refused or could
// not be routed: Redis is not there, and retrying will not make it so.
func refusedConn(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
}

// refused opens the breaker at once and cancels the calls in flight: a
// connection to Redis was refused.
func (s *Store) refused(cause error) {
	s.last.Store(&cause)
	s.brk.trip(time.Now())
	s.abort.Swap(newAbort()).cancel(cause)
}

// tryRedis reports whether a call may go to Redis now; when it may not, the
// breaker is open, and the caller picked to probe starts the probe.
func (s *Store) tryRedis() bool {
	try, probe := s.brk.allowNow()
	if probe {
		s.probe()
	}
	return try
}

// probe pings Redis in a goroutine of its own, bounded by the store's
// timeout, and closes the breaker if Redis answers.
func (s *Store) probe() {
	go func() {
		ctx, cancel := context.Background(), context.CancelFunc(noCancel)
		if s.timeout > 0 {
			ctx, cancel = context.WithTimeout(ctx, s.timeout)
		}
		defer cancel()
		err := s.client.Ping(ctx).Err()
		if err == nil {
			s.brk.success()
			return
		}
		if pastDeadline(ctx) || errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("probe: %w", s.timedOut(err))
		}
		s.failed(err)
	}()
}

// dialWatch is the hook that reports a client's refused dials to its store.
type dialWatch struct{ s *Store }

// DialHook reports a refused dial to the store, and passes every dial on.
func (h dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil && refusedConn(err) {
			h.s.refused(err)
		}
		return conn, err
	}
}

// ProcessHook leaves commands alone.
func (h dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook leaves pipelines alone.
func (h dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
