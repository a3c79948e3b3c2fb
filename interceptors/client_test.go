package interceptors

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/shed"
)

// cliT0 is the instant the tests' manual clocks start at: whole seconds, as
// an HTTP-date has; in the future, so that a context deadline set from it
// has not passed in real time; and before 2069, so that an RFC 850 date's
// two-digit year reads back right.
var cliT0 = time.Date(2040, 3, 4, 5, 6, 7, 0, time.UTC)

// cliWaits is a fake wait: it records each requested delay, advances its
// manual clock by it, and returns at once; tests never sleep.
type cliWaits struct {
	clk *clock.Manual

	mu     sync.Mutex
	delays []time.Duration
	before func(ctx context.Context) error // optional: runs before recording
}

func newCliWaits() *cliWaits { return &cliWaits{clk: clock.NewManual(cliT0)} }

func (w *cliWaits) wait(ctx context.Context, d time.Duration) error {
	if w.before != nil {
		if err := w.before(ctx); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	w.delays = append(w.delays, d)
	w.mu.Unlock()
	w.clk.Advance(d)
	return nil
}

func (w *cliWaits) recorded() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.delays...)
}

// mustHaveWaited fails t unless w recorded n waits, each positive and at
// least min: never an immediate retry, never before the server's time.
func (w *cliWaits) mustHaveWaited(t *testing.T, n int, min time.Duration) {
	t.Helper()
	delays := w.recorded()
	if len(delays) != n {
		t.Fatalf("waits %v, want %d", delays, n)
	}
	for _, d := range delays {
		if d <= 0 || d < min {
			t.Errorf("waits %v: want each > 0 and ≥ %v", delays, min)
			return
		}
	}
}

// opts returns the options that make a client deterministic: the fake wait,
// its clock, and a seed.
func (w *cliWaits) opts(extra ...ClientOption) []ClientOption {
	return append([]ClientOption{WithClientWait(w.wait), WithClientClock(w.clk), WithClientSeed(1)}, extra...)
}

func TestClientPriorityContext(t *testing.T) {
	ctx := context.Background()
	if _, ok := PriorityFrom(ctx); ok {
		t.Fatal("PriorityFrom(Background) reports a priority")
	}
	for _, tc := range []struct {
		in, want shed.Priority
	}{
		{shed.CriticalPlus, shed.CriticalPlus},
		{shed.Critical, shed.Critical},
		{shed.SheddablePlus, shed.SheddablePlus},
		{shed.Sheddable, shed.Sheddable},
		{shed.Priorities, shed.Sheddable},
		{200, shed.Sheddable},
	} {
		got, ok := PriorityFrom(WithPriority(ctx, tc.in))
		if !ok || got != tc.want {
			t.Errorf("PriorityFrom(WithPriority(%v)) = %v, %v; want %v, true", tc.in, got, ok, tc.want)
		}
	}
}

func TestClientOptionsInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  ClientOption
		want string
	}{
		{"nil budget", WithClientBudget(nil), "WithClientBudget(nil)"},
		{"zero base", WithClientBackoff(retry.Backoff{Max: time.Second}), "WithClientBackoff"},
		{"negative base", WithClientBackoff(retry.Backoff{Base: -1, Max: time.Second}), "WithClientBackoff"},
		{"max below base", WithClientBackoff(retry.Backoff{Base: time.Second, Max: time.Millisecond}), "WithClientBackoff"},
		{"zero attempts", WithClientMaxAttempts(0), "WithClientMaxAttempts(0)"},
		{"too many attempts", WithClientMaxAttempts(101), "WithClientMaxAttempts(101)"},
		{"zero max delay", WithClientMaxDelay(0), "WithClientMaxDelay(0s)"},
		{"max delay below backoff cap", WithClientMaxDelay(time.Second), "WithClientMaxDelay(1s)"},
		{"nil wait", WithClientWait(nil), "WithClientWait(nil)"},
		{"nil clock", WithClientClock(nil), "WithClientClock(nil)"},
		{"no methods", WithClientRetryMethods(), "WithClientRetryMethods()"},
		{"bad method", WithClientRetryMethods("GET", "PO ST"), `"PO ST"`},
		{"empty method", WithClientRetryMethods(""), `""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Errors name the constructor and the option, as the server's do.
			if _, err := NewTransport(nil, tc.opt); err == nil || !strings.Contains(err.Error(), "sluice/interceptors: NewTransport: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewTransport: error %v, want one mentioning NewTransport and %s", err, tc.want)
			}
			if _, err := UnaryClientInterceptor(tc.opt); err == nil || !strings.Contains(err.Error(), "UnaryClientInterceptor: ") {
				t.Errorf("UnaryClientInterceptor: error %v", err)
			}
			if _, err := StreamClientInterceptor(tc.opt); err == nil || !strings.Contains(err.Error(), "StreamClientInterceptor: ") {
				t.Errorf("StreamClientInterceptor: error %v", err)
			}
		})
	}
	// Every problem is reported, not only the first.
	_, err := NewTransport(nil, WithClientMaxAttempts(0), WithClientWait(nil))
	if err == nil || !strings.Contains(err.Error(), "WithClientMaxAttempts") || !strings.Contains(err.Error(), "WithClientWait") {
		t.Errorf("two invalid options: error %v, want both reported", err)
	}
	// Valid edge cases.
	if _, err := NewTransport(nil, WithClientThrottle(nil), WithClientMaxAttempts(1)); err != nil {
		t.Errorf("valid options: %v", err)
	}
	// A nil option is a wiring mistake, reported as the server reports a
	// zero ServerOption.
	if _, err := NewTransport(nil, nil); err == nil || !strings.Contains(err.Error(), "NewTransport: nil ClientOption") {
		t.Errorf("nil option: error %v", err)
	}
}

func TestClientThrottledError(t *testing.T) {
	var err error = &cliThrottledError{prio: shed.Sheddable}
	if !errors.Is(err, ErrClientThrottled) {
		t.Error("not ErrClientThrottled")
	}
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "sheddable") {
		t.Errorf("status %v, want UNAVAILABLE naming the priority", st)
	}
}

func TestClientDefaultSleep(t *testing.T) {
	// The default wait returns the context's error without waiting when the
	// context has ended (a real wait is not exercised: tests never sleep).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := cliSleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("cliSleep(cancelled, 1h) = %v, want context.Canceled", err)
	}
}

func TestClientPlan(t *testing.T) {
	ctx := context.Background()
	newPol := func(t *testing.T, opts ...ClientOption) *cliPolicy {
		t.Helper()
		w := newCliWaits()
		budget, err := retry.NewBudget(1, 1000)
		if err != nil {
			t.Fatal(err)
		}
		pol, err := newCliPolicy("test", w.opts(append([]ClientOption{WithClientThrottle(nil), WithClientBudget(budget)}, opts...)...))
		if err != nil {
			t.Fatal(err)
		}
		for range 200 {
			pol.admit(shed.Critical) // earn a budget
		}
		return pol
	}
	t.Run("attempts used up", func(t *testing.T) {
		pol := newPol(t, WithClientMaxAttempts(2))
		if _, ok := pol.plan(ctx, 1, 0); !ok {
			t.Error("attempt 1 of 2: no retry")
		}
		if _, ok := pol.plan(ctx, 2, 0); ok {
			t.Error("attempt 2 of 2: retry")
		}
	})
	t.Run("hint beyond max delay", func(t *testing.T) {
		pol := newPol(t, WithClientMaxDelay(time.Minute))
		if d, ok := pol.plan(ctx, 1, time.Minute); !ok || d != time.Minute {
			t.Errorf("hint 1m: %v, %v; want 1m, true", d, ok)
		}
		if _, ok := pol.plan(ctx, 1, time.Minute+1); ok {
			t.Error("hint 1m+1ns: retry")
		}
	})
	t.Run("never immediate, capped, at least the hint", func(t *testing.T) {
		pol := newPol(t, WithClientBackoff(retry.Backoff{Base: 100 * time.Millisecond, Max: 400 * time.Millisecond}), WithClientMaxAttempts(100))
		for k := 1; k < 50; k++ {
			d, ok := pol.plan(ctx, k, 0)
			ceil := min(400*time.Millisecond, 100*time.Millisecond<<min(k-1, 10))
			if !ok || d <= 0 || d > ceil {
				t.Fatalf("attempt %d: delay %v, %v; want in (0, %v]", k, d, ok, ceil)
			}
			if d, _ := pol.plan(ctx, k, 3*time.Second); d < 3*time.Second {
				t.Fatalf("attempt %d with hint 3s: delay %v", k, d)
			}
		}
	})
	t.Run("ended context", func(t *testing.T) {
		pol := newPol(t)
		c, cancel := context.WithCancel(ctx)
		cancel()
		if _, ok := pol.plan(c, 1, 0); ok {
			t.Error("cancelled context: retry")
		}
	})
}

// The client accounts a call under the priority the server will read from
// the same metadata or header values: both halves use readPriority.
func TestClientPriorityAsServerReadsIt(t *testing.T) {
	for _, vals := range [][]string{
		{"sheddable"}, {" sheddable\t"}, {"SHEDDABLE_PLUS"}, {"2"}, {"bogus"},
		{strings.Repeat("x", 100)}, {"sheddable", "critical_plus"},
	} {
		md := metadata.MD{}
		r := httptest.NewRequest("GET", "/", nil)
		for _, v := range vals {
			md.Append(PriorityMetadataKey, v)
			r.Header.Add(PriorityHeader, v)
		}
		server := MetadataPriority(metadata.NewIncomingContext(context.Background(), md), "/s/m")
		if h := HeaderPriority(r); h != server {
			t.Errorf("%q: header gives %v, metadata %v", vals, h, server)
		}
		ctx := WithPriority(metadata.NewOutgoingContext(context.Background(), md), shed.CriticalPlus)
		if _, client := cliOutgoingPriority(ctx); client != server {
			t.Errorf("%q: the client accounts %v, the server reads %v", vals, client, server)
		}
	}
}
