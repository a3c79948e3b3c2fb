package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/metrics"
)

// WithObserver reports the store's work to o (metrics/prom and
// metrics/gometrics implement it): every call of one of the store's scripts
// to Redis, with its duration and how it ended, and every request the
// failure policy decided, with the cause. The calls are timed by a go-redis
// hook (AddHook) that the store adds to the client; it looks only at the
// store's own scripts and passes every command on unchanged. Default: none.
func WithObserver(o metrics.StoreObserver) Option {
	return func(c *config) {
		if o == nil {
			c.bad("nil observer")
			return
		}
		c.observer = o
	}
}

// callWatch is the hook that times the store's script calls for its
// observer. ops maps the SHA1 of each of the store's scripts to the
// operation it performs.
type callWatch struct {
	obs metrics.StoreObserver
	ops map[string]string
}

// newCallWatch builds the hook for s's scripts.
func newCallWatch(s *Store, obs metrics.StoreObserver) callWatch {
	ops := map[string]string{}
	for _, sc := range s.scripts {
		ops[sc.Hash()] = "decide"
	}
	for _, sc := range leanScripts {
		if sc != nil {
			ops[sc.Hash()] = "decide"
		}
	}
	for _, name := range leanFunctions {
		if name != "" {
			ops[name] = "decide"
		}
	}
	ops[leaseAcquire.Hash()] = "lease_acquire"
	ops[leaseRelease.Hash()] = "lease_release"
	ops[leaseRenew.Hash()] = "lease_renew"
	ops[leaseCount.Hash()] = "lease_count"
	return callWatch{obs: obs, ops: ops}
}

// op returns the operation of cmd if it runs one of the store's scripts.
func (h callWatch) op(cmd redis.Cmder) (string, bool) {
	args := cmd.Args()
	if len(args) < 2 {
		return "", false
	}
	body, _ := args[1].(string)
	switch cmd.Name() {
	case "evalsha", "evalsha_ro", "fcall", "fcall_ro": // by hash, or by function name
		op, ok := h.ops[body]
		return op, ok
	case "eval", "eval_ro": // a store's first call of a script, or after NOSCRIPT: rare, so hashing it costs nothing that matters
		sum := sha1.Sum([]byte(body))
		op, ok := h.ops[hex.EncodeToString(sum[:])]
		return op, ok
	}
	return "", false
}

// ProcessHook times the store's script calls.
func (h callWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		op, ok := h.op(cmd)
		if !ok {
			return next(ctx, cmd)
		}
		start := time.Now()
		err := next(ctx, cmd)
		h.report(ctx, op, err, time.Since(start))
		return err
	}
}

// report tells the observer how one call of op ended, unless it failed with
// NOSCRIPT: the EVAL that follows is the call that counts.
func (h callWatch) report(ctx context.Context, op string, err error, took time.Duration) {
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		return
	}
	h.obs.StoreCall(op, callOutcome(ctx, err), took)
}

// DialHook leaves dials alone.
func (h callWatch) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook times the store's calls sent in a pipeline (the
// first Redis Function call loads the library in the same round trip):
// each script or function call in it counts once, with the pipeline's time.
func (h callWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		watched := false
		for _, c := range cmds {
			if _, ok := h.op(c); ok {
				watched = true
				break
			}
		}
		if !watched {
			return next(ctx, cmds)
		}
		start := time.Now()
		err := next(ctx, cmds)
		took := time.Since(start)
		for _, c := range cmds {
			if op, ok := h.op(c); ok {
				cerr := c.Err()
				if cerr == nil && err != nil && !errors.Is(err, redis.Nil) {
					cerr = err
				}
				h.report(ctx, op, cerr, took)
			}
		}
		return err
	}
}

// callOutcome classifies a call's end for the observer.
func callOutcome(ctx context.Context, err error) metrics.StoreOutcome {
	switch {
	case err == nil || errors.Is(err, redis.Nil):
		return metrics.StoreOK
	case pastDeadline(ctx) || errors.Is(err, context.DeadlineExceeded):
		return metrics.StoreTimedOut
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return metrics.StoreCanceled
	}
	return metrics.StoreFailed
}

// observeDegraded reports n requests decided by policy after cause.
func (s *Store) observeDegraded(policy FailurePolicy, cause error, n int) {
	if s.observer != nil {
		s.observer.StoreDegraded(policy.String(), degradedCause(cause), n)
	}
}

// degradedCause classifies the cause of a degraded decision for the
// observer.
func degradedCause(cause error) metrics.StoreOutcome {
	switch {
	case errors.Is(cause, ErrBreakerOpen):
		return metrics.StoreBreakerOpen
	case errors.Is(cause, context.DeadlineExceeded):
		return metrics.StoreTimedOut
	case errors.Is(cause, context.Canceled):
		return metrics.StoreCanceled
	}
	return metrics.StoreFailed
}
