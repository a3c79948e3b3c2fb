package interceptors

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/shed"
)

// Defaults of the server options; each option's doc repeats its default.
const (
	// DefaultStoreErrorRetry is the retry time sent when a rate limit's
	// store fails and the request is refused (WithStoreErrorRetry).
	DefaultStoreErrorRetry = time.Second
	// DefaultOverloadRetry is the retry time sent when the adaptive gate is
	// full, or the shedder gives no hint of its own (WithOverloadRetry).
	DefaultOverloadRetry = time.Second
)

// Outcome is what a finished request says about the server's capacity,
// and so how its adaptive.Token is released.
type Outcome uint8

const (
	// OutcomeSuccess releases the token with Success: the request's
	// duration is a round-trip-time sample.
	OutcomeSuccess Outcome = iota
	// OutcomeDropped releases the token with Dropped: the request failed
	// because of overload (a timeout, an overload refusal further down).
	OutcomeDropped
	// OutcomeIgnore releases the token with Ignore: the outcome says nothing
	// about capacity (the client went away).
	OutcomeIgnore
)

// String returns "success", "dropped" or "ignore".
func (o Outcome) String() string {
	switch o {
	case OutcomeSuccess:
		return "success"
	case OutcomeDropped:
		return "dropped"
	case OutcomeIgnore:
		return "ignore"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// srvScope says which constructors an option applies to.
type srvScope uint8

const (
	srvHTTP srvScope = 1 << iota
	srvGRPC
	srvRate    // the rate-limit middleware and interceptors
	srvGate    // the adaptive-gate middleware and interceptors
	srvShedder // the shedder middleware and interceptors

	srvAnyTransport = srvHTTP | srvGRPC
	srvAnyGuard     = srvRate | srvGate | srvShedder
)

// ServerOption configures every server-side constructor: the middleware
// (RateLimitMiddleware, GateMiddleware, ShedMiddleware) and the interceptors
// (RateLimitInterceptors, GateInterceptors, ShedInterceptors). An option
// that applies to some of them only has a narrower type (RateOption,
// HTTPRateOption, OverloadOption, HTTPOverloadOption, GRPCOverloadOption,
// HTTPShedOption, GRPCShedOption), and each constructor takes the options
// of its own interface (RateLimitMiddlewareOption, ...), so giving one an
// option that does not apply to it does not compile. Invalid values are
// reported by the constructor's error, every one at once.
type ServerOption struct {
	name  string
	scope srvScope
	apply func(*srvConfig) error
}

// RateOption configures the rate-limit constructors, RateLimitMiddleware
// and RateLimitInterceptors.
type RateOption ServerOption

// HTTPRateOption configures RateLimitMiddleware only.
type HTTPRateOption ServerOption

// OverloadOption configures the gate and shedder constructors of both
// transports: GateMiddleware, ShedMiddleware, GateInterceptors and
// ShedInterceptors.
type OverloadOption ServerOption

// HTTPOverloadOption configures GateMiddleware and ShedMiddleware.
type HTTPOverloadOption ServerOption

// GRPCOverloadOption configures GateInterceptors and ShedInterceptors.
type GRPCOverloadOption ServerOption

// HTTPShedOption configures ShedMiddleware only.
type HTTPShedOption ServerOption

// GRPCShedOption configures ShedInterceptors only.
type GRPCShedOption ServerOption

// RateLimitMiddlewareOption is an option RateLimitMiddleware takes: a
// ServerOption, RateOption or HTTPRateOption.
type RateLimitMiddlewareOption interface{ httpRate() ServerOption }

// GateMiddlewareOption is an option GateMiddleware takes: a ServerOption,
// OverloadOption or HTTPOverloadOption.
type GateMiddlewareOption interface{ httpGate() ServerOption }

// ShedMiddlewareOption is an option ShedMiddleware takes: a ServerOption,
// OverloadOption, HTTPOverloadOption or HTTPShedOption.
type ShedMiddlewareOption interface{ httpShed() ServerOption }

// RateLimitInterceptorsOption is an option RateLimitInterceptors takes: a
// ServerOption or RateOption.
type RateLimitInterceptorsOption interface{ grpcRate() ServerOption }

// GateInterceptorsOption is an option GateInterceptors takes: a
// ServerOption, OverloadOption or GRPCOverloadOption.
type GateInterceptorsOption interface{ grpcGate() ServerOption }

// ShedInterceptorsOption is an option ShedInterceptors takes: a
// ServerOption, OverloadOption, GRPCOverloadOption or GRPCShedOption.
type ShedInterceptorsOption interface{ grpcShed() ServerOption }

func (o ServerOption) httpRate() ServerOption       { return o }
func (o ServerOption) httpGate() ServerOption       { return o }
func (o ServerOption) httpShed() ServerOption       { return o }
func (o ServerOption) grpcRate() ServerOption       { return o }
func (o ServerOption) grpcGate() ServerOption       { return o }
func (o ServerOption) grpcShed() ServerOption       { return o }
func (o RateOption) httpRate() ServerOption         { return ServerOption(o) }
func (o RateOption) grpcRate() ServerOption         { return ServerOption(o) }
func (o HTTPRateOption) httpRate() ServerOption     { return ServerOption(o) }
func (o OverloadOption) httpGate() ServerOption     { return ServerOption(o) }
func (o OverloadOption) httpShed() ServerOption     { return ServerOption(o) }
func (o OverloadOption) grpcGate() ServerOption     { return ServerOption(o) }
func (o OverloadOption) grpcShed() ServerOption     { return ServerOption(o) }
func (o HTTPOverloadOption) httpGate() ServerOption { return ServerOption(o) }
func (o HTTPOverloadOption) httpShed() ServerOption { return ServerOption(o) }
func (o GRPCOverloadOption) grpcGate() ServerOption { return ServerOption(o) }
func (o GRPCOverloadOption) grpcShed() ServerOption { return ServerOption(o) }
func (o HTTPShedOption) httpShed() ServerOption     { return ServerOption(o) }
func (o GRPCShedOption) grpcShed() ServerOption     { return ServerOption(o) }

// srvOptions turns a constructor's options into ServerOptions through its
// interface's method (get).
func srvOptions[O any](opts []O, get func(O) ServerOption) []ServerOption {
	out := make([]ServerOption, len(opts))
	for i, o := range opts {
		out[i] = get(o)
	}
	return out
}

// srvConfig is the configuration every server constructor builds from its
// options; each constructor reads only the fields that apply to it.
type srvConfig struct {
	jitter          time.Duration
	uniform         func() float64 // the jitter's source, see uniformSource
	storeErrorRetry time.Duration
	failOpen        bool
	legacy          bool
	clock           clock.Clock // the legacy Reset field's wall time
	overloadRetry   time.Duration

	grpcClassifier func(ctx context.Context, err error) Outcome
	httpClassifier func(r *http.Request, status int) Outcome

	grpcPriority func(ctx context.Context, fullMethod string) shed.Priority
	httpPriority func(r *http.Request) shed.Priority
	grpcUser     func(ctx context.Context, fullMethod string) uint64
	httpUser     func(r *http.Request) uint64
}

// srvBuild applies opts for a constructor of the given scope (one transport
// bit and one guard bit) and reports every option that is invalid or does
// not apply. The constructors' option types already keep out an option
// that does not apply; the scope check stays for one converted to a wider
// type (ServerOption(WithLegacyHeaders(true))), which would otherwise be
// silently ignored.
func srvBuild(scope srvScope, what string, opts []ServerOption) (*srvConfig, error) {
	c := &srvConfig{
		uniform:         rand.Float64,
		storeErrorRetry: DefaultStoreErrorRetry,
		overloadRetry:   DefaultOverloadRetry,
		grpcClassifier:  DefaultGRPCClassifier,
		httpClassifier:  DefaultHTTPClassifier,
		grpcPriority:    MetadataPriority,
		httpPriority:    HeaderPriority,
		clock:           clock.System(),
	}
	var errs []error
	for _, o := range opts {
		if o.apply == nil {
			errs = append(errs, fmt.Errorf("sluice/interceptors: %s: zero ServerOption", what))
			continue
		}
		if o.scope&scope&srvAnyTransport == 0 || o.scope&scope&srvAnyGuard == 0 {
			errs = append(errs, fmt.Errorf("sluice/interceptors: %s: option %s does not apply", what, o.name))
			continue
		}
		if err := o.apply(c); err != nil {
			errs = append(errs, fmt.Errorf("sluice/interceptors: %s: %s: %w", what, o.name, err))
		}
	}
	return c, errors.Join(errs...)
}

// WithRetryJitter adds a uniformly random delay in [0, max] to every retry
// time the server sends (Retry-After, RetryInfo, grpc-retry-pushback-ms),
// so that refused clients do not come back all at once. It only ever adds:
// a client is never told to come back earlier than the limit allows.
// Default 0 (no jitter); max must not be negative. All constructors.
func WithRetryJitter(max time.Duration) ServerOption {
	return ServerOption{"WithRetryJitter", srvAnyTransport | srvAnyGuard, func(c *srvConfig) error {
		if max < 0 {
			return fmt.Errorf("negative jitter %v", max)
		}
		c.jitter = max
		return nil
	}}
}

// WithJitterSource sets the source of the uniform numbers in [0, 1) that
// WithRetryJitter draws from (default math/rand/v2's Float64). It must be
// safe for concurrent use. Tests pass a fixed function. All constructors.
func WithJitterSource(f func() float64) ServerOption {
	return ServerOption{"WithJitterSource", srvAnyTransport | srvAnyGuard, func(c *srvConfig) error {
		if f == nil {
			return errors.New("nil source")
		}
		c.uniform = f
		return nil
	}}
}

// WithStoreErrorRetry sets the retry time sent when a rate limit fails
// without a decision (the limiter returned an error: a store with no
// failure policy is down, say) and the request is refused with 503 or
// UNAVAILABLE (default DefaultStoreErrorRetry; positive). A store's
// fail-closed policy sends its own retry time. Rate-limit constructors
// only.
func WithStoreErrorRetry(d time.Duration) RateOption {
	return RateOption{"WithStoreErrorRetry", srvAnyTransport | srvRate, func(c *srvConfig) error {
		if d <= 0 {
			return fmt.Errorf("retry %v is not positive", d)
		}
		c.storeErrorRetry = d
		return nil
	}}
}

// WithFailOpen(true) admits a request the rate limit could not check
// because its store failed — the limiter returned no decision, or the
// store's own failure policy refused (ratelimit.SourceFailClosed) —
// instead of refusing it with 503 or UNAVAILABLE; such a response carries
// RateLimit-Policy and no RateLimit member for the failed quotas. A quota's
// refusal, and a full store's (ratelimit.SourceFull), still refuse.
// Default false (fail closed). Rate-limit constructors only.
func WithFailOpen(on bool) RateOption {
	return RateOption{"WithFailOpen", srvAnyTransport | srvRate, func(c *srvConfig) error {
		c.failOpen = on
		return nil
	}}
}

// WithLegacyHeaders(true) adds the legacy rate-limit fields that clients
// of GitHub's API, ulule/limiter or express-rate-limit read, next to the
// IETF RateLimit and RateLimit-Policy fields: X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset (Unix seconds, rounded up),
// for the tightest quota of the request — a refusing one, else the one with
// the fewest units left. Like RateLimit, they are sent only when a quota's
// decision read the caller's state (never invented while a store is down).
// They cost a few allocations per response. Default false. HTTP rate-limit
// middleware only.
func WithLegacyHeaders(on bool) HTTPRateOption {
	return HTTPRateOption{"WithLegacyHeaders", srvHTTP | srvRate, func(c *srvConfig) error {
		c.legacy = on
		return nil
	}}
}

// WithClock sets the clock that dates X-RateLimit-Reset (WithLegacyHeaders;
// default clock.System()): give it the clock of the route's limiters when
// they run on a manual or coarse one. HTTP rate-limit middleware only.
func WithClock(c clock.Clock) HTTPRateOption {
	return HTTPRateOption{"WithClock", srvHTTP | srvRate, func(cfg *srvConfig) error {
		if c == nil {
			return errors.New("nil clock")
		}
		cfg.clock = c
		return nil
	}}
}

// WithOverloadRetry sets the retry time sent when the adaptive gate is full,
// and when the shedder refuses without a hint of its own (default
// DefaultOverloadRetry; positive). Gate and shedder constructors only.
func WithOverloadRetry(d time.Duration) OverloadOption {
	return OverloadOption{"WithOverloadRetry", srvAnyTransport | srvGate | srvShedder, func(c *srvConfig) error {
		if d <= 0 {
			return fmt.Errorf("retry %v is not positive", d)
		}
		c.overloadRetry = d
		return nil
	}}
}

// WithGRPCClassifier sets how a finished RPC releases its token, from the
// handler's error and the RPC's context (default DefaultGRPCClassifier).
// gRPC gate and shedder interceptors only.
func WithGRPCClassifier(f func(ctx context.Context, err error) Outcome) GRPCOverloadOption {
	return GRPCOverloadOption{"WithGRPCClassifier", srvGRPC | srvGate | srvShedder, func(c *srvConfig) error {
		if f == nil {
			return errors.New("nil classifier")
		}
		c.grpcClassifier = f
		return nil
	}}
}

// WithHTTPClassifier sets how a finished HTTP request releases its token,
// from the request and the status code the handler wrote (default
// DefaultHTTPClassifier). HTTP gate and shedder middleware only.
func WithHTTPClassifier(f func(r *http.Request, status int) Outcome) HTTPOverloadOption {
	return HTTPOverloadOption{"WithHTTPClassifier", srvHTTP | srvGate | srvShedder, func(c *srvConfig) error {
		if f == nil {
			return errors.New("nil classifier")
		}
		c.httpClassifier = f
		return nil
	}}
}

// WithGRPCPriority sets how the shedder interceptors read an RPC's priority
// (default MetadataPriority). f also runs in the interceptors' Tap, in the
// connection's reader goroutine: it must be fast and must not block, and it
// sees the incoming metadata and peer but no value an interceptor adds.
// gRPC shedder interceptors only.
func WithGRPCPriority(f func(ctx context.Context, fullMethod string) shed.Priority) GRPCShedOption {
	return GRPCShedOption{"WithGRPCPriority", srvGRPC | srvShedder, func(c *srvConfig) error {
		if f == nil {
			return errors.New("nil priority extractor")
		}
		c.grpcPriority = f
		return nil
	}}
}

// WithHTTPPriority sets how the shedder middleware reads a request's
// priority (default HeaderPriority). HTTP shedder middleware only.
func WithHTTPPriority(f func(r *http.Request) shed.Priority) HTTPShedOption {
	return HTTPShedOption{"WithHTTPPriority", srvHTTP | srvShedder, func(c *srvConfig) error {
		if f == nil {
			return errors.New("nil priority extractor")
		}
		c.httpPriority = f
		return nil
	}}
}

// WithGRPCUser sets how the shedder interceptors identify an RPC's user,
// so that a shed user is shed consistently (see shed.Shedder; shed.UserHash turns
// an id into the number). By default every RPC is a user of its own, drawn
// at random: a shed priority is then refused in fractions, never all at
// once, but a user's calls are not shed together. f also runs in the
// interceptors' Tap (see WithGRPCPriority). gRPC shedder interceptors
// only.
func WithGRPCUser(f func(ctx context.Context, fullMethod string) uint64) GRPCShedOption {
	return GRPCShedOption{"WithGRPCUser", srvGRPC | srvShedder, func(c *srvConfig) error {
		if f == nil {
			return errors.New("nil user extractor")
		}
		c.grpcUser = f
		return nil
	}}
}

// WithHTTPUser sets how the shedder middleware identifies a request's user
// (see WithGRPCUser; by default every request is a user of its own).
// HTTP shedder middleware only.
func WithHTTPUser(f func(r *http.Request) uint64) HTTPShedOption {
	return HTTPShedOption{"WithHTTPUser", srvHTTP | srvShedder, func(c *srvConfig) error {
		if f == nil {
			return errors.New("nil user extractor")
		}
		c.httpUser = f
		return nil
	}}
}

// UserHash maps a user id to the number the shedder draws cohorts from;
// it is shed.UserHash, kept here for the code that found it here.
//
// Deprecated: use shed.UserHash, which needs no gRPC import.
func UserHash(id string) uint64 { return shed.UserHash(id) }
