package interceptors

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// GRPCQuota is one tier of a rate-limited gRPC service: a named rate limit
// and how to key an RPC for it.
type GRPCQuota struct {
	// Name names the policy in refusal messages: 1 to 64 bytes of
	// printable ASCII, unique among the quotas.
	Name string
	// Limiter decides the tier. The limiters keep their state in memory,
	// or all share one store (see ratelimit.All).
	Limiter *ratelimit.Limiter
	// Key extracts the RPC's key for this tier.
	Key GRPCKeyFunc
}

// GRPCInterceptors are the unary and stream server interceptors of one
// guard, and its tap handle if it has one. Install them with
// grpc.ChainUnaryInterceptor, grpc.ChainStreamInterceptor and
// grpc.InTapHandle; the guards compose in the order given.
type GRPCInterceptors struct {
	// Unary guards unary RPCs.
	Unary grpc.UnaryServerInterceptor
	// Stream guards streaming RPCs; a guard that holds a token holds it
	// until the stream's handler returns.
	Stream grpc.StreamServerInterceptor
	// Tap, when not nil, refuses the RPCs the guard would refuse before
	// taking a token — the gate's front limit (adaptive.WithFrontSignal)
	// and, for the shedder, a level it sheds — as soon as their headers are
	// read, before the server starts a goroutine for them or reads their
	// message: the interceptors would refuse them too, later and at more
	// CPU, which is what the process is short of when the front limit
	// refuses (gRPC on one core at 2x its capacity, three interleaved runs:
	// 75–82% of it served within the SLO without the tap, 85–95% with it;
	// bench/README.md). It lets everything else through to the
	// interceptors, which decide again, and an RPC whose deadline has
	// already passed, which gRPC then ends with DEADLINE_EXCEEDED. Its
	// refusal is the interceptors' UNAVAILABLE with its RetryInfo detail,
	// without the grpc-retry-pushback-ms trailer, which gRPC cannot send
	// from a tap handle.
	//
	// It runs for every RPC of the server, in the connection's reader
	// goroutine while gRPC holds the transport's lock, before every
	// interceptor: an RPC it refuses spends no rate-limit quota, is not
	// seen by stats handlers, and is refused even for a method the
	// interceptors are not installed on. The shedder's priority and user
	// functions (WithGRPCPriority, WithGRPCUser) run there too, so they
	// must be fast and must not block, and see the RPC's incoming metadata
	// and peer but no value an interceptor would add. nil for a guard with
	// nothing to refuse that early (RateLimitInterceptors). Install it with
	// grpc.InTapHandle: a server takes one tap handle, so install several
	// with ChainTapHandles.
	Tap tap.ServerInHandle
}

// srvGRPCAdmit decides an RPC. held reports whether tok must be released
// when the handler returns; a non-nil error refuses the RPC (the trailer has
// been set on ss, or on ctx's stream for a unary RPC when ss is nil).
type srvGRPCAdmit func(ctx context.Context, fullMethod string, ss grpc.ServerStream) (tok adaptive.Token, held bool, err error)

// srvInterceptors builds both interceptors around admit.
func (c *srvConfig) srvInterceptors(admit srvGRPCAdmit) GRPCInterceptors {
	return GRPCInterceptors{
		Unary: func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			tok, held, err := admit(ctx, info.FullMethod, nil)
			if err != nil {
				return nil, err
			}
			if !held {
				return handler(ctx, req)
			}
			o := OutcomeIgnore // if the handler or the classifier panics
			defer func() { srvRelease(tok, o) }()
			resp, err := handler(ctx, req)
			o = c.grpcClassifier(ctx, err)
			return resp, err
		},
		Stream: func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			ctx := ss.Context()
			tok, held, err := admit(ctx, info.FullMethod, ss)
			if err != nil {
				return err
			}
			if !held {
				return handler(srv, ss)
			}
			o := OutcomeIgnore // if the handler or the classifier panics
			defer func() { srvRelease(tok, o) }()
			err = handler(srv, ss) // the token is held for the stream's life
			o = c.grpcClassifier(ctx, err)
			return err
		},
	}
}

// srvRefuseGRPC sets the retry trailer and returns the refusal status:
// code and msg, with a google.rpc.RetryInfo detail. Both carry the retry
// time rounded up to whole milliseconds.
func srvRefuseGRPC(ctx context.Context, ss grpc.ServerStream, code codes.Code, msg string, retry time.Duration) error {
	ms := max(1, srvCeilMillis(retry))
	md := metadata.Pairs(RetryPushbackTrailer, strconv.FormatInt(ms, 10))
	if ss != nil {
		ss.SetTrailer(md)
	} else {
		_ = grpc.SetTrailer(ctx, md) // fails only outside a server RPC
	}
	return srvRefusalStatus(code, msg, ms)
}

// srvRefusalStatus is the refusal status: code and msg, with a
// google.rpc.RetryInfo detail of ms milliseconds.
func srvRefusalStatus(code codes.Code, msg string, ms int64) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(ms) * time.Millisecond)}); err == nil {
		st = d
	}
	return st.Err()
}

// ChainTapHandles returns one tap handle that runs taps in order, each with
// the context the previous one returned, and stops at the first that
// refuses the RPC, returning its error; nil taps are skipped. A gRPC server
// takes one tap handle (grpc.InTapHandle), so a server with several guards
// that have one, or a tap of its own, installs their chain: put the
// cheapest refusals first.
func ChainTapHandles(taps ...tap.ServerInHandle) tap.ServerInHandle {
	taps = slices.DeleteFunc(slices.Clone(taps), func(t tap.ServerInHandle) bool { return t == nil })
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		for _, t := range taps {
			var err error
			if ctx, err = t(ctx, info); err != nil {
				return ctx, err
			}
		}
		return ctx, nil
	}
}

// srvTap is a tap handle that lets an RPC through while pass says so, and
// otherwise refuses it with UNAVAILABLE, msg and a RetryInfo detail of retry
// (rounded up to whole milliseconds).
func srvTap(pass func(ctx context.Context, method string) (ok bool, msg string, retry time.Duration)) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if ctx.Err() != nil {
			return ctx, nil // gRPC ends it with DEADLINE_EXCEEDED, as it would without a tap
		}
		ok, msg, retry := pass(ctx, info.FullMethodName)
		if ok {
			return ctx, nil
		}
		return ctx, srvRefusalStatus(codes.Unavailable, msg, max(1, srvCeilMillis(retry)))
	}
}

// RateLimitInterceptors returns interceptors that admit an RPC (a stream
// counts once, when it opens) only if every quota admits it, at a cost of
// one unit (ratelimit.All: a tier that admits spends nothing when another
// refuses).
//
// An RPC refused by a quota fails with RESOURCE_EXHAUSTED, a
// google.rpc.RetryInfo detail and the grpc-retry-pushback-ms trailer, both
// carrying the exact retry time rounded up to whole milliseconds (plus any
// WithRetryJitter, never less). An RPC refused for any other reason is not
// the client's quota and fails with UNAVAILABLE, with the same retry
// detail and trailer: when the store failed and its failure policy refused
// (ratelimit.SourceFailClosed; its retry time), or is admitted with
// WithFailOpen; when the limiter failed without a decision (an error;
// WithStoreErrorRetry's retry time), or is admitted with WithFailOpen; and
// when the store is full of other keys (ratelimit.SourceFull; the
// limiter's hint), which WithFailOpen does not lift. An RPC whose context
// ended before the limiter decided fails with its context's status. A key
// extractor's error, or a key the limiter refuses as invalid, fails with
// INVALID_ARGUMENT.
//
// It returns an error if quotas is empty or holds an invalid entry, if the
// limiters cannot be tiered, and for options that are invalid or do not
// apply (it takes WithRetryJitter, WithJitterSource, WithStoreErrorRetry and
// WithFailOpen).
func RateLimitInterceptors(quotas []GRPCQuota, opts ...RateLimitInterceptorsOption) (GRPCInterceptors, error) {
	cfg, err := srvBuild(srvGRPC|srvRate, "RateLimitInterceptors", srvOptions(opts, RateLimitInterceptorsOption.grpcRate))
	if err != nil {
		return GRPCInterceptors{}, err
	}
	quotas = slices.Clone(quotas) // the caller may reuse its slice
	q, err := srvNewQuotas("RateLimitInterceptors", quotas)
	if err != nil {
		return GRPCInterceptors{}, err
	}
	admit := func(ctx context.Context, method string, ss grpc.ServerStream) (adaptive.Token, bool, error) {
		sc := q.get()
		defer q.put(sc)
		for i, qt := range quotas {
			k, err := qt.Key(ctx, method)
			if err != nil {
				return adaptive.Token{}, false, status.Error(codes.InvalidArgument, srvKeyErrorMessage(err))
			}
			sc.keys[i] = k
		}
		res, err := q.tiers.AllowN(ctx, sc.keys, 1, sc.each)
		if err != nil { // no decision
			switch {
			case errors.Is(err, ratelimit.ErrInvalidKey):
				return adaptive.Token{}, false, status.Error(codes.InvalidArgument, "sluice: malformed rate-limit key")
			case cfg.failOpen:
				return adaptive.Token{}, false, nil
			case ctx.Err() != nil:
				return adaptive.Token{}, false, status.FromContextError(ctx.Err()).Err()
			}
			return adaptive.Token{}, false, srvRefuseGRPC(ctx, ss, codes.Unavailable,
				"sluice: rate limit unavailable", cfg.srvRetry(cfg.storeErrorRetry))
		}
		if !res.Allowed {
			if v := q.violated(sc.each); len(v) > 0 {
				msg := "sluice: rate limit exceeded (" + strings.Join(v, ", ") + ")"
				return adaptive.Token{}, false, srvRefuseGRPC(ctx, ss, codes.ResourceExhausted, msg, cfg.srvRetry(res.RetryAfter))
			}
			failed := srvCapacityRefusal(sc.each)
			switch {
			case failed && cfg.failOpen:
				return adaptive.Token{}, false, nil
			case failed:
				return adaptive.Token{}, false, srvRefuseGRPC(ctx, ss, codes.Unavailable,
					"sluice: rate limit unavailable", cfg.srvRetry(res.RetryAfter))
			}
			return adaptive.Token{}, false, srvRefuseGRPC(ctx, ss, codes.Unavailable,
				"sluice: rate limit tracks too many keys", cfg.srvRetry(res.RetryAfter))
		}
		return adaptive.Token{}, false, nil
	}
	return cfg.srvInterceptors(admit), nil
}

// srvKeyErrorMessage describes a key extractor's error without echoing input.
func srvKeyErrorMessage(err error) string {
	if errors.Is(err, ErrNoKey) {
		return "sluice: missing rate-limit key"
	}
	return "sluice: malformed rate-limit key"
}

// GateInterceptors returns interceptors that run each RPC under a token of
// the adaptive gate, waiting in the gate's queue if it has one
// (adaptive.Limiter.Acquire); a stream holds its token until its handler
// returns. An RPC the gate refuses fails with UNAVAILABLE, a RetryInfo
// detail and the grpc-retry-pushback-ms trailer (WithOverloadRetry, plus any
// jitter); one whose context ends while it waits fails with the context's
// status (CANCELLED or DEADLINE_EXCEEDED). The token is released as the
// classifier decides from the handler's error (DefaultGRPCClassifier, or
// WithGRPCClassifier), and with Ignore if the handler panics. Chain rate
// limits before the gate: the default classifier counts a
// RESOURCE_EXHAUSTED from inside as a drop. The returned Tap (install it
// with grpc.InTapHandle) refuses what the gate's front limit refuses before
// the RPC costs anything, with the same status and detail but no trailer.
//
// It returns an error for a nil gate and for options that are invalid or do
// not apply (it takes WithRetryJitter, WithJitterSource, WithOverloadRetry and
// WithGRPCClassifier).
func GateInterceptors(gate *adaptive.Limiter, opts ...GateInterceptorsOption) (GRPCInterceptors, error) {
	cfg, err := srvBuild(srvGRPC|srvGate, "GateInterceptors", srvOptions(opts, GateInterceptorsOption.grpcGate))
	if err != nil {
		return GRPCInterceptors{}, err
	}
	if gate == nil {
		return GRPCInterceptors{}, errors.New("sluice/interceptors: GateInterceptors: nil gate")
	}
	admit := func(ctx context.Context, _ string, ss grpc.ServerStream) (adaptive.Token, bool, error) {
		tok, err := gate.Acquire(ctx)
		if err == nil {
			return tok, true, nil
		}
		if !errors.Is(err, adaptive.ErrLimitExceeded) && ctx.Err() != nil {
			return adaptive.Token{}, false, status.FromContextError(ctx.Err()).Err()
		}
		return adaptive.Token{}, false, srvRefuseGRPC(ctx, ss, codes.Unavailable,
			srvAtCapacity, cfg.srvRetry(cfg.overloadRetry))
	}
	ics := cfg.srvInterceptors(admit)
	ics.Tap = srvTap(func(context.Context, string) (bool, string, time.Duration) {
		if gate.PassFront() {
			return true, "", 0
		}
		return false, srvAtCapacity, cfg.srvRetry(cfg.overloadRetry)
	})
	return ics, nil
}

// srvAtCapacity is the message of an RPC the gate refuses.
const srvAtCapacity = "sluice: server at capacity"

// ShedInterceptors returns interceptors that admit each RPC through the
// shedder by its priority (MetadataPriority, or WithGRPCPriority) and user
// (WithGRPCUser; by default every RPC is a user of its own, drawn at
// random); a stream holds its token until its handler returns. An RPC that is shed, or finds the gate behind
// the shedder full, fails with UNAVAILABLE, a RetryInfo detail and the
// grpc-retry-pushback-ms trailer (the shedder's hint, else
// WithOverloadRetry, plus any jitter). The token is released as with
// GateInterceptors. The returned Tap (install it with grpc.InTapHandle)
// refuses what the shedder sheds for its level and what the gate's front
// limit refuses before the RPC costs anything (shed.Shedder.PassFront),
// with the same status and detail but no trailer.
//
// It returns an error for a nil shedder and for options that are invalid or
// do not apply (it takes WithRetryJitter, WithJitterSource,
// WithOverloadRetry, WithGRPCClassifier, WithGRPCPriority and WithGRPCUser).
func ShedInterceptors(s *shed.Shedder, opts ...ShedInterceptorsOption) (GRPCInterceptors, error) {
	cfg, err := srvBuild(srvGRPC|srvShedder, "ShedInterceptors", srvOptions(opts, ShedInterceptorsOption.grpcShed))
	if err != nil {
		return GRPCInterceptors{}, err
	}
	if s == nil {
		return GRPCInterceptors{}, errors.New("sluice/interceptors: ShedInterceptors: nil shedder")
	}
	user := func(ctx context.Context, method string) uint64 {
		if cfg.grpcUser != nil {
			return cfg.grpcUser(ctx, method)
		}
		return rand.Uint64() // no user source: a cohort per request, so shedding is graded
	}
	msg := func(d shed.Decision) string {
		if d.Shed {
			return "sluice: shed (priority too low for the current load)"
		}
		return srvAtCapacity
	}
	admit := func(ctx context.Context, method string, ss grpc.ServerStream) (adaptive.Token, bool, error) {
		tok, dec := s.TryAcquire(cfg.grpcPriority(ctx, method), user(ctx, method))
		if dec.Admitted {
			return tok, true, nil
		}
		return adaptive.Token{}, false, srvRefuseGRPC(ctx, ss, codes.Unavailable, msg(dec), cfg.srvShedRetry(dec))
	}
	ics := cfg.srvInterceptors(admit)
	ics.Tap = srvTap(func(ctx context.Context, method string) (bool, string, time.Duration) {
		dec, ok := s.PassFront(cfg.grpcPriority(ctx, method), user(ctx, method))
		if ok {
			return true, "", 0
		}
		return false, msg(dec), cfg.srvShedRetry(dec)
	})
	return ics, nil
}

// DefaultGRPCClassifier releases an RPC's token with Ignore when the client
// canceled it (its context was canceled, or the handler returned CANCELLED),
// with Dropped when the handler returned DEADLINE_EXCEEDED,
// RESOURCE_EXHAUSTED or UNAVAILABLE (or a context.DeadlineExceeded error),
// the signs of overload, and with Success otherwise, including for other
// errors: a handler that answers NOT_FOUND quickly has served its request.
func DefaultGRPCClassifier(ctx context.Context, err error) Outcome {
	if errors.Is(ctx.Err(), context.Canceled) {
		return OutcomeIgnore
	}
	if err == nil {
		return OutcomeSuccess
	}
	switch {
	case errors.Is(err, context.Canceled):
		return OutcomeIgnore
	case errors.Is(err, context.DeadlineExceeded):
		return OutcomeDropped
	}
	switch status.Code(err) {
	case codes.Canceled:
		return OutcomeIgnore
	case codes.DeadlineExceeded, codes.ResourceExhausted, codes.Unavailable:
		return OutcomeDropped
	}
	return OutcomeSuccess
}
