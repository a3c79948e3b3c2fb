package interceptors

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"slices"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// HTTPQuota is one tier of a rate-limited HTTP route: a named rate limit
// and how to key a request for it.
type HTTPQuota struct {
	// Name names the policy in the RateLimit-Policy and RateLimit fields
	// and in the problem body's violated-policies: 1 to 64 bytes of
	// printable ASCII, unique on the route.
	Name string
	// Limiter decides the tier. The limiters of one route keep their state
	// in memory, or all share one store (see ratelimit.All).
	Limiter *ratelimit.Limiter
	// Key extracts the request's key for this tier.
	Key HTTPKeyFunc
}

// RateLimitMiddleware returns middleware that admits a request only if every
// quota admits it (ratelimit.All: a tier that admits spends nothing when
// another refuses), at a cost of one unit.
//
// Every response of the route carries RateLimit-Policy, one member per
// quota, "name";q=QUOTA;w=WINDOW, with q the limit's Burst (Rate for the
// window algorithms) and w the whole seconds, rounded up, in which it grants
// q again; and, once the request has been decided, RateLimit, one member
// per quota whose decision read the key's state (ratelimit.SourceLimit, or
// SourceFailLocal: the local fallback's numbers while the store is down),
// "name";r=REMAINING;t=SECONDS, where t is the retry time of a refusing
// tier, or else the time until the key is back to its full quota, in whole
// seconds rounded up. A quota decided without the key's state (a fail-open
// or fail-closed policy of a failed store, a full store) has no member, and
// the field is omitted when no quota has one: its numbers are never
// invented.
//
// A request refused by a quota gets 429 with Retry-After (the exact retry
// time rounded up to whole seconds, plus any WithRetryJitter, never less)
// and an application/problem+json body of type ProblemQuotaExceeded naming
// the violated policies. A request refused for any other reason is not the
// client's quota and gets 503 of type ProblemReducedCapacity with
// Retry-After: when the store failed and its failure policy refused
// (ratelimit.SourceFailClosed; its retry time, the breaker's cool-down on
// Redis), or is admitted with WithFailOpen; when the limiter failed without
// a decision (an error; WithStoreErrorRetry's retry time), or is admitted
// with WithFailOpen; and when the store is full of other keys
// (ratelimit.SourceFull; the limiter's hint), which WithFailOpen does not
// lift, as a full store is the defence against key sprays, not a failure. A
// key extractor's error, or a key the limiter refuses as invalid, gets 400
// with a problem body. The wrapped handler runs only for admitted requests.
// Applying the middleware to a nil handler panics.
//
// It returns an error if quotas is empty or holds an invalid entry (bad or
// duplicate name, nil limiter or key), if the limiters cannot be tiered, and
// for options that are invalid or do not apply (it takes WithRetryJitter,
// WithJitterSource, WithStoreErrorRetry, WithFailOpen, WithLegacyHeaders
// and WithClock).
func RateLimitMiddleware(quotas []HTTPQuota, opts ...RateLimitMiddlewareOption) (func(http.Handler) http.Handler, error) {
	cfg, err := srvBuild(srvHTTP|srvRate, "RateLimitMiddleware", srvOptions(opts, RateLimitMiddlewareOption.httpRate))
	if err != nil {
		return nil, err
	}
	quotas = slices.Clone(quotas) // the caller may reuse its slice
	q, err := srvNewQuotas("RateLimitMiddleware", quotas)
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		srvCheckHandler(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h[srvCanonPolicy] = []string{q.policy}
			sc := q.get()
			for i, qt := range quotas {
				k, err := qt.Key(r)
				if err != nil {
					q.put(sc)
					srvWriteProblem(w, srvBadRequestProblem(srvKeyErrorDetail(err)), 0)
					return
				}
				sc.keys[i] = k
			}
			res, err := q.tiers.AllowN(r.Context(), sc.keys, 1, sc.each)
			if err != nil { // no decision
				q.put(sc)
				switch {
				case errors.Is(err, ratelimit.ErrInvalidKey):
					srvWriteProblem(w, srvBadRequestProblem("The rate-limit key of the request is malformed."), 0)
				case cfg.failOpen:
					next.ServeHTTP(w, r)
				default:
					srvWriteProblem(w, srvCapacityProblem("The rate limit could not be checked; retry after the time given."), cfg.srvRetry(cfg.storeErrorRetry))
				}
				return
			}
			if srvAnyKnown(sc.each) {
				sc.buf = srvRateLimitField(sc.buf, q.sfName, sc.each)
				h[srvCanonRateLimit] = []string{string(sc.buf)}
				if cfg.legacy {
					if l, rem, reset, ok := srvLegacyFields(cfg.clock.Now(), q.quota, sc.each); ok {
						h[srvCanonLegacyLimit] = []string{l}
						h[srvCanonLegacyRemaining] = []string{rem}
						h[srvCanonLegacyReset] = []string{reset}
					}
				}
			}
			if !res.Allowed {
				violated := q.violated(sc.each)
				failed := srvCapacityRefusal(sc.each)
				q.put(sc)
				switch {
				case len(violated) > 0:
					srvWriteProblem(w, srvQuotaProblem(violated), cfg.srvRetry(res.RetryAfter))
				case failed && cfg.failOpen:
					next.ServeHTTP(w, r)
				case failed:
					srvWriteProblem(w, srvCapacityProblem("The rate limit could not be checked; retry after the time given."), cfg.srvRetry(res.RetryAfter))
				default:
					srvWriteProblem(w, srvCapacityProblem("The server tracks too many clients to take a new one now; retry after the time given."), cfg.srvRetry(res.RetryAfter))
				}
				return
			}
			q.put(sc)
			next.ServeHTTP(w, r)
		})
	}, nil
}

// The canonical forms of the RateLimit field names, set into header maps
// directly so that no request pays for canonicalising them.
var (
	srvCanonPolicy    = http.CanonicalHeaderKey(RateLimitPolicyHeader)
	srvCanonRateLimit = http.CanonicalHeaderKey(RateLimitHeader)

	srvCanonLegacyLimit     = http.CanonicalHeaderKey(LegacyLimitHeader)
	srvCanonLegacyRemaining = http.CanonicalHeaderKey(LegacyRemainingHeader)
	srvCanonLegacyReset     = http.CanonicalHeaderKey(LegacyResetHeader)
)

// srvCheckHandler panics, when the middleware is applied, on a nil handler:
// a wiring mistake that must not surface as a failure of every request.
func srvCheckHandler(next http.Handler) {
	if next == nil {
		panic("sluice/interceptors: middleware applied to a nil http.Handler")
	}
}

// srvKeyErrorDetail describes a key extractor's error without echoing input.
func srvKeyErrorDetail(err error) string {
	if errors.Is(err, ErrNoKey) {
		return "The request does not carry the rate-limit key this route requires."
	}
	return "The rate-limit key of the request is malformed."
}

// GateMiddleware returns middleware that runs each request under a token of
// the adaptive gate, waiting in the gate's queue if it has one
// (adaptive.Limiter.Acquire). A request the gate refuses, or whose context
// ends while it waits, gets 503 with Retry-After (WithOverloadRetry, plus any
// jitter) and a problem body of type ProblemReducedCapacity. The token is
// held until the handler returns and released as the classifier decides from
// the status written (DefaultHTTPClassifier, or WithHTTPClassifier); if the
// handler panics it is released with Ignore and the panic goes on.
// Applying the middleware to a nil handler panics. Put rate limits outside
// the gate, as in rateLimit(gate(h)): the default classifier counts a 429
// from inside as a drop.
//
// It returns an error for a nil gate and for options that are invalid or do
// not apply (it takes WithRetryJitter, WithJitterSource, WithOverloadRetry and
// WithHTTPClassifier).
func GateMiddleware(gate *adaptive.Limiter, opts ...GateMiddlewareOption) (func(http.Handler) http.Handler, error) {
	cfg, err := srvBuild(srvHTTP|srvGate, "GateMiddleware", srvOptions(opts, GateMiddlewareOption.httpGate))
	if err != nil {
		return nil, err
	}
	if gate == nil {
		return nil, errors.New("sluice/interceptors: GateMiddleware: nil gate")
	}
	return func(next http.Handler) http.Handler {
		srvCheckHandler(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, err := gate.Acquire(r.Context())
			if err != nil {
				detail := "The server is at capacity; retry after the time given."
				if !errors.Is(err, adaptive.ErrLimitExceeded) {
					detail = "The request's deadline passed while it waited for capacity."
				}
				srvWriteProblem(w, srvCapacityProblem(detail), cfg.srvRetry(cfg.overloadRetry))
				return
			}
			cfg.srvServeHTTP(tok, next, w, r)
		})
	}, nil
}

// ShedMiddleware returns middleware that admits each request through the
// shedder by its priority (HeaderPriority, or WithHTTPPriority) and user
// (WithHTTPUser; by default every request is a user of its own, drawn at
// random, so a shed priority is refused in fractions, never all at once —
// set a user source to shed a user's requests together). A request that is shed,
// or finds the gate behind the shedder full, gets 503 with Retry-After (the
// shedder's hint, else WithOverloadRetry, plus any jitter) and a problem body
// of type ProblemReducedCapacity. The token is held and released as with
// GateMiddleware, and applying the middleware to a nil handler panics.
//
// It returns an error for a nil shedder and for options that are invalid or
// do not apply (it takes WithRetryJitter, WithJitterSource,
// WithOverloadRetry, WithHTTPClassifier, WithHTTPPriority and WithHTTPUser).
func ShedMiddleware(s *shed.Shedder, opts ...ShedMiddlewareOption) (func(http.Handler) http.Handler, error) {
	cfg, err := srvBuild(srvHTTP|srvShedder, "ShedMiddleware", srvOptions(opts, ShedMiddlewareOption.httpShed))
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errors.New("sluice/interceptors: ShedMiddleware: nil shedder")
	}
	return func(next http.Handler) http.Handler {
		srvCheckHandler(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			user := rand.Uint64() // no user source: a cohort per request, so shedding is graded
			if cfg.httpUser != nil {
				user = cfg.httpUser(r)
			}
			tok, dec := s.TryAcquire(cfg.httpPriority(r), user)
			if !dec.Admitted {
				detail := "The server is at capacity; retry after the time given."
				if dec.Shed {
					detail = "The server is shedding requests of this priority; retry after the time given."
				}
				srvWriteProblem(w, srvCapacityProblem(detail), cfg.srvShedRetry(dec))
				return
			}
			cfg.srvServeHTTP(tok, next, w, r)
		})
	}, nil
}

// srvServeHTTP runs next holding tok and releases it exactly once: by the
// classifier's outcome, or with Ignore if the handler or the classifier
// panics.
func (c *srvConfig) srvServeHTTP(tok adaptive.Token, next http.Handler, w http.ResponseWriter, r *http.Request) {
	sw := &srvStatusWriter{ResponseWriter: w}
	o := OutcomeIgnore // if the handler or the classifier panics
	defer func() { srvRelease(tok, o) }()
	next.ServeHTTP(sw, r)
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	o = c.httpClassifier(r, status)
}

// srvRelease releases tok as outcome o says.
func srvRelease(tok adaptive.Token, o Outcome) {
	switch o {
	case OutcomeDropped:
		tok.Dropped()
	case OutcomeIgnore:
		tok.Ignore()
	default:
		tok.Success()
	}
}

// DefaultHTTPClassifier releases a request's token with Ignore when the
// client went away (the request's context was canceled), with Dropped when
// its deadline passed or the handler answered 429, 503 or 504 (overload
// further down), and with Success otherwise.
func DefaultHTTPClassifier(r *http.Request, status int) Outcome {
	switch err := r.Context().Err(); {
	case errors.Is(err, context.Canceled):
		return OutcomeIgnore
	case errors.Is(err, context.DeadlineExceeded):
		return OutcomeDropped
	}
	switch status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return OutcomeDropped
	}
	return OutcomeSuccess
}

// srvStatusWriter records the status a handler writes. It forwards Flush
// and exposes the wrapped writer to http.ResponseController via Unwrap.
type srvStatusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the first final status and forwards it.
func (w *srvStatusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200 and forwards the bytes.
func (w *srvStatusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush sends buffered data to the client, if the wrapped writer can.
func (w *srvStatusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (w *srvStatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
