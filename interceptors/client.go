package interceptors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/shed"
)

// ErrClientThrottled is the error (matched with errors.Is) of a request that
// the client's adaptive throttle refused locally: the request was not sent,
// because the server has recently refused most requests of its priority.
// Through gRPC it has code UNAVAILABLE.
var ErrClientThrottled = errors.New("sluice: refused by the client throttle, not sent")

// cliThrottledError is a local refusal: it matches ErrClientThrottled and
// carries a gRPC status, as grpc-go requires of interceptor errors.
type cliThrottledError struct {
	prio shed.Priority
}

func (e *cliThrottledError) Error() string {
	return fmt.Sprintf("sluice: %s request refused by the client throttle, not sent: the server refused most recent %s requests", e.prio, e.prio)
}

func (e *cliThrottledError) Unwrap() error { return ErrClientThrottled }

// GRPCStatus gives the refusal the status code UNAVAILABLE.
func (e *cliThrottledError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Error())
}

// ClientOption configures the client Transport and the client interceptors
// (NewTransport, UnaryClientInterceptor, StreamClientInterceptor), which
// validate the result and report every invalid or nil option in one error.
// The options are named Client…, the server's ServerOptions With….
type ClientOption func(*cliConfig)

type cliConfig struct {
	throttle    *retry.Throttle[shed.Priority]
	throttleSet bool
	budget      *retry.Budget
	budgetSet   bool
	backoff     retry.Backoff
	maxAttempts int
	maxDelay    time.Duration
	seed        uint64
	seeded      bool
	wait        func(ctx context.Context, d time.Duration) error
	clock       clock.Clock
	methods     []string
	methodsSet  bool
}

// The defaults, documented on the options.
const (
	cliDefaultBase        = 100 * time.Millisecond
	cliDefaultCap         = 10 * time.Second
	cliDefaultMaxAttempts = 3
	cliDefaultMaxDelay    = 30 * time.Second
	cliDefaultRatio       = 0.1
	cliDefaultSaved       = 10
	cliMaxAttemptsLimit   = 100
)

// WithClientThrottle sets the adaptive client throttle (retry.Throttle) that
// refuses requests locally once the server refuses most of them. Share one
// Throttle between the clients of one backend. The default is a
// retry.NewThrottle[shed.Priority] with its defaults (seeded by
// WithClientSeed if given); nil turns local throttling off.
func WithClientThrottle(t *retry.Throttle[shed.Priority]) ClientOption {
	return func(c *cliConfig) { c.throttle, c.throttleSet = t, true }
}

// WithClientBudget sets the retry budget (retry.Budget): a retry is made only if
// the budget has one. The default is retry.NewBudget(0.1, 10), started full:
// retries are at most a tenth of requests, plus at most 10 saved up. (A
// budget from retry.NewBudget starts empty: it earns its first retry after
// 1/ratio requests.) Share one Budget between the clients of one backend.
// nil is an error: an unbudgeted retrying client is how a retry storm
// starts.
func WithClientBudget(b *retry.Budget) ClientOption {
	return func(c *cliConfig) { c.budget, c.budgetSet = b, true }
}

// WithClientBackoff sets the backoff between attempts: retry k waits
// U(0, min(Max, Base·2^(k−1))), and never less than the server's retry time
// (see retry.Backoff). Default Base 100ms, Max 10s; Base must be positive and
// Max at least Base.
func WithClientBackoff(b retry.Backoff) ClientOption {
	return func(c *cliConfig) { c.backoff = b }
}

// WithClientMaxAttempts sets the most attempts per request or call, the first
// included (default 3; 1 turns retries off; at most 100).
func WithClientMaxAttempts(n int) ClientOption {
	return func(c *cliConfig) { c.maxAttempts = n }
}

// WithClientMaxDelay sets the longest wait before a retry (default 30s; at least
// the backoff's Max). When the server asks for a longer wait, its refusal is
// returned at once instead.
func WithClientMaxDelay(d time.Duration) ClientOption {
	return func(c *cliConfig) { c.maxDelay = d }
}

// WithClientSeed seeds the jitter (and the default throttle's local refusals), so
// that a client's delays are reproducible (default: random).
func WithClientSeed(seed uint64) ClientOption {
	return func(c *cliConfig) { c.seed, c.seeded = seed, true }
}

// WithClientWait sets how the client waits before a retry: wait must block for d
// or until ctx ends, whichever comes first, and return nil or ctx's error
// respectively. The default uses a timer. Tests give a function that records
// d and returns at once (advancing a clock.Manual given to WithClientClock).
func WithClientWait(wait func(ctx context.Context, d time.Duration) error) ClientOption {
	return func(c *cliConfig) { c.wait = wait }
}

// WithClientClock sets the clock that dates a Retry-After given as an HTTP-date
// and measures the time left before a context's deadline (default
// clock.System()).
func WithClientClock(clk clock.Clock) ClientOption {
	return func(c *cliConfig) { c.clock = clk }
}

// WithClientRetryMethods sets the HTTP methods the Transport retries (default
// the idempotent ones: GET, HEAD, OPTIONS, TRACE, PUT, DELETE); a request
// with an Idempotency-Key header is retried whatever its method. Methods are
// case-sensitive, as in HTTP. The gRPC interceptors ignore this option.
func WithClientRetryMethods(methods ...string) ClientOption {
	return func(c *cliConfig) { c.methods, c.methodsSet = methods, true }
}

// cliPolicy is the retry and throttle policy shared by the Transport and the
// interceptors. Safe for concurrent use.
type cliPolicy struct {
	throttle    *retry.Throttle[shed.Priority] // nil: no local throttling
	budget      *retry.Budget
	backoff     retry.Backoff
	maxAttempts int
	maxDelay    time.Duration
	wait        func(ctx context.Context, d time.Duration) error
	clock       clock.Clock
	methods     map[string]bool
	uniform     func() float64 // the jitter, from seededUniform
}

// newCliPolicy applies opts over the defaults and validates the result;
// what names the constructor in errors, as the server constructors do.
func newCliPolicy(what string, opts []ClientOption) (*cliPolicy, error) {
	cfg := cliConfig{
		backoff:     retry.Backoff{Base: cliDefaultBase, Max: cliDefaultCap},
		maxAttempts: cliDefaultMaxAttempts,
		maxDelay:    cliDefaultMaxDelay,
		wait:        cliSleep,
		clock:       clock.System(),
	}
	var errs []error
	for _, o := range opts {
		if o == nil { // as the server constructors reject a zero ServerOption
			errs = append(errs, fmt.Errorf("sluice/interceptors: %s: nil ClientOption", what))
			continue
		}
		o(&cfg)
	}
	if cfg.budgetSet && cfg.budget == nil {
		errs = append(errs, fmt.Errorf("sluice/interceptors: %s: WithClientBudget(nil): a client that retries needs a budget (use WithClientMaxAttempts(1) for no retries)", what))
	}
	if cfg.backoff.Base <= 0 || cfg.backoff.Max < cfg.backoff.Base {
		errs = append(errs, fmt.Errorf("sluice/interceptors: %s: WithClientBackoff base %v, max %v: need 0 < base ≤ max", what, cfg.backoff.Base, cfg.backoff.Max))
	}
	if cfg.maxAttempts < 1 || cfg.maxAttempts > cliMaxAttemptsLimit {
		errs = append(errs, fmt.Errorf("sluice/interceptors: %s: WithClientMaxAttempts(%d): must be in [1, %d]", what, cfg.maxAttempts, cliMaxAttemptsLimit))
	}
	if cfg.maxDelay < cfg.backoff.Max || cfg.maxDelay <= 0 {
		errs = append(errs, fmt.Errorf("sluice/interceptors: %s: WithClientMaxDelay(%v): must be positive and at least the backoff's max %v", what, cfg.maxDelay, cfg.backoff.Max))
	}
	if cfg.wait == nil {
		errs = append(errs, fmt.Errorf("sluice/interceptors: %s: WithClientWait(nil)", what))
	}
	if cfg.clock == nil {
		errs = append(errs, fmt.Errorf("sluice/interceptors: %s: WithClientClock(nil)", what))
	}
	methods := map[string]bool{
		http.MethodGet: true, http.MethodHead: true, http.MethodOptions: true,
		http.MethodTrace: true, http.MethodPut: true, http.MethodDelete: true,
	}
	if cfg.methodsSet {
		methods = make(map[string]bool, len(cfg.methods))
		if len(cfg.methods) == 0 {
			errs = append(errs, fmt.Errorf("sluice/interceptors: %s: WithClientRetryMethods(): no method (use WithClientMaxAttempts(1) for no retries)", what))
		}
		for _, m := range cfg.methods {
			if !isToken(m) {
				errs = append(errs, fmt.Errorf("sluice/interceptors: %s: WithClientRetryMethods: %q is not an HTTP method", what, m))
			}
			methods[m] = true
		}
	}
	if !cfg.seeded {
		cfg.seed = rand.Uint64()
	}
	if !cfg.throttleSet && cfg.clock != nil {
		t, err := retry.NewThrottle[shed.Priority](retry.WithThrottleSeed(cfg.seed^0x7417), retry.WithThrottleClock(cfg.clock))
		if err != nil {
			errs = append(errs, fmt.Errorf("sluice/interceptors: %s: %w", what, err))
		}
		cfg.throttle = t
	}
	if !cfg.budgetSet {
		b, err := retry.NewBudget(cliDefaultRatio, cliDefaultSaved)
		if err != nil {
			errs = append(errs, fmt.Errorf("sluice/interceptors: %s: %w", what, err))
		} else {
			// Start full, so that a new client can retry at once.
			for range int(math.Ceil(cliDefaultSaved / cliDefaultRatio)) {
				b.Request()
			}
		}
		cfg.budget = b
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &cliPolicy{
		throttle:    cfg.throttle,
		budget:      cfg.budget,
		backoff:     cfg.backoff,
		maxAttempts: cfg.maxAttempts,
		maxDelay:    cfg.maxDelay,
		wait:        cfg.wait,
		clock:       cfg.clock,
		methods:     methods,
		uniform:     seededUniform(cfg.seed),
	}, nil
}

// admit decides whether to send a request of priority p: the throttle may
// refuse it locally; if it is sent, it earns the budget its share of a
// retry. The throttle sees a request once, however many attempts it takes:
// the throttle decides whether to send it at all, the budget whether to
// retry it.
func (pol *cliPolicy) admit(p shed.Priority) error {
	if pol.throttle != nil && !pol.throttle.Allow(p) {
		return &cliThrottledError{prio: p}
	}
	pol.budget.Request()
	return nil
}

// record tells the throttle that the server accepted a request: its last
// attempt had an answer that is not an overload refusal. A request that is
// not recorded counts as refused.
func (pol *cliPolicy) record(p shed.Priority, accepted bool) {
	if accepted && pol.throttle != nil {
		pol.throttle.Accepted(p)
	}
}

// plan decides whether to retry after attempt number attempt (1 for the
// first) was refused with the server's retry time hint, and how long to
// wait first. It refuses when attempts are used up, when the wait would
// exceed the maximum delay or end after ctx's deadline, when ctx has ended,
// or when the budget has no retry; the budget is asked last, so that a
// refusal spends nothing.
func (pol *cliPolicy) plan(ctx context.Context, attempt int, hint time.Duration) (time.Duration, bool) {
	if attempt >= pol.maxAttempts || hint > pol.maxDelay || ctx.Err() != nil {
		return 0, false
	}
	d := pol.backoff.Delay(attempt, hint, pol.uniform())
	if d > pol.maxDelay {
		return 0, false
	}
	if dl, ok := ctx.Deadline(); ok && dl.Sub(pol.clock.Now()) <= d {
		return 0, false
	}
	if !pol.budget.TryRetry() {
		return 0, false
	}
	return d, true
}

// cliSleep is the default wait: a timer, cut short when ctx ends.
func cliSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
