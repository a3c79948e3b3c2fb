package redisstore

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// trips counts a client's round trips (a command or a pipeline) and the
// commands by name.
type trips struct {
	mu    sync.Mutex
	trips int
	cmds  map[string]int
}

func (h *trips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note(cmd)
		return next(ctx, cmd)
	}
}

func (h *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.note(cmds...)
		return next(ctx, cmds)
	}
}

func (h *trips) note(cmds ...redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	counted := false
	for _, c := range cmds {
		if n := c.Name(); n != "hello" && n != "client" { // a new connection's handshake
			h.cmds[n]++
			counted = true
		}
	}
	if counted {
		h.trips++
	}
}

// take returns the counts since the last take.
func (h *trips) take() (int, map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, c := h.trips, h.cmds
	h.trips, h.cmds = 0, map[string]int{}
	return t, c
}

func testClient(t *testing.T, addr string) (*redis.Client, *trips) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	h := &trips{cmds: map[string]int{}}
	c.AddHook(h)
	return c, h
}

// On a Redis with Functions, a store's first decision loads the library
// and calls it in one round trip (one pipeline), every later one is one
// FCALL, and a server that lost the library (FUNCTION FLUSH) costs one
// extra round trip once; SCRIPT FLUSH changes nothing.
func TestFunctionCalls(t *testing.T) {
	srv := redistest.Start(t)
	c, h := testClient(t, srv.Addr)
	ctx := context.Background()
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingLog, ratelimit.SlidingWindow, ratelimit.TokenBucket, ratelimit.GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			if err := c.FunctionFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			expect, allow := tripChecks(t, c, h, alg, 3)
			allow(true)
			expect("the first decision", 1, map[string]int{"function": 1, "fcall": 1})
			allow(true)
			allow(true)
			allow(false)
			expect("warm decisions", 3, map[string]int{"fcall": 3})
			if err := c.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			h.take()
			allow(false)
			expect("after SCRIPT FLUSH", 1, map[string]int{"fcall": 1})
			if err := c.FunctionFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			h.take()
			allow(false)
			expect("after FUNCTION FLUSH", 2, map[string]int{"fcall": 2, "function": 1})
			allow(false)
			expect("then", 1, map[string]int{"fcall": 1})
		})
	}
}

// Where Functions are not used (an older Redis, Cluster, Ring), the same
// bodies run as scripts, with the same decisions.
func TestConformanceScripts(t *testing.T) {
	srv := redistest.Start(t)
	c, h := testClient(t, srv.Addr)
	s, err := New(c, WithTimeout(30*time.Second), WithCallerTime(), WithRefusalCache(0), WithoutFunctions())
	if err != nil {
		t.Fatal(err)
	}
	ratelimittest.RunResolution(t, func(*testing.T) ratelimit.Store { return s }, time.Microsecond)
	if _, cmds := h.take(); cmds["fcall"] != 0 || cmds["evalsha"] == 0 {
		t.Fatalf("commands %v: want EVALSHA and no FCALL", cmds)
	}
}

// A server without Functions (told by its error) makes the store fall back
// to scripts for good.
func TestNoFunctionsFallback(t *testing.T) {
	for _, msg := range []string{"ERR unknown command 'FUNCTION'", "ERR unknown subcommand 'LOAD'", "NOPERM this user has no permissions to run the 'function|load' command"} {
		if !isNoFunctions(errors.New(msg)) {
			t.Errorf("isNoFunctions(%q) = false", msg)
		}
	}
	if isNoFunctions(&net.OpError{Op: "dial", Err: errors.New("connection refused")}) || isNoFunctions(nil) {
		t.Error("a network error read as no Functions")
	}
	if !isNoFunction(errors.New("ERR Function not found")) || isNoFunction(errors.New("NOSCRIPT")) {
		t.Error("isNoFunction")
	}
}

// tripChecks builds a limiter of alg, rate an hour, on a new store on c
// with opts, and returns checks of the round trips and commands h counted
// since the last check (expect), and of one Allow of key "k" (allow).
func tripChecks(t *testing.T, c *redis.Client, h *trips, alg ratelimit.Algorithm, rate int, opts ...Option) (expect func(what string, trips int, cmds map[string]int), allow func(want bool)) {
	t.Helper()
	s, err := New(c, append([]Option{WithTimeout(30 * time.Second), WithRefusalCache(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(alg, ratelimit.Limit{Rate: rate, Period: time.Hour}, ratelimit.WithStore(s))
	if err != nil {
		t.Fatal(err)
	}
	h.take()
	expect = func(what string, trips int, cmds map[string]int) {
		t.Helper()
		gt, gc := h.take()
		if gt != trips || len(gc) != len(cmds) {
			t.Fatalf("%s: %d round trips %v, want %d %v", what, gt, gc, trips, cmds)
		}
		for k, v := range cmds {
			if gc[k] != v {
				t.Fatalf("%s: %d round trips %v, want %d %v", what, gt, gc, trips, cmds)
			}
		}
	}
	allow = func(want bool) {
		t.Helper()
		res, err := l.Allow(context.Background(), "k")
		if err != nil || res.Allowed != want || res.Source != ratelimit.SourceLimit {
			t.Fatalf("Allow: %+v %v, want allowed %v", res, err, want)
		}
	}
	return expect, allow
}

// Without Functions, a store's first call of a script sends it in full
// (EVAL, one round trip), later ones by hash (EVALSHA); a server that lost
// its scripts (SCRIPT FLUSH, a restart) costs one extra round trip once.
func TestScriptCalls(t *testing.T) {
	srv := redistest.Start(t)
	c, h := testClient(t, srv.Addr)
	ctx := context.Background()
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingLog, ratelimit.SlidingWindow, ratelimit.TokenBucket, ratelimit.GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			if err := c.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			expect, allow := tripChecks(t, c, h, alg, 2, WithoutFunctions())
			allow(true)
			expect("the first decision", 1, map[string]int{"eval": 1})
			allow(true)
			allow(false)
			expect("warm decisions", 2, map[string]int{"evalsha": 2})
			if err := c.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			h.take()
			allow(false)
			expect("after SCRIPT FLUSH", 2, map[string]int{"evalsha": 1, "eval": 1})
			allow(false)
			expect("then", 1, map[string]int{"evalsha": 1})
		})
	}
}
