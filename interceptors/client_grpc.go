package interceptors

import (
	"context"
	"errors"
	"io"
	"math"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/shed"
)

// UnaryClientInterceptor returns a gRPC unary client interceptor that keeps
// a client from turning a server's overload into a retry storm:
//
//   - a call the adaptive client throttle refuses fails at once, without
//     being sent, with code UNAVAILABLE and an error matching
//     ErrClientThrottled (a call whose last attempt is answered UNAVAILABLE
//     or RESOURCE_EXHAUSTED counts as refused, any other outcome as
//     accepted; the throttle decides once per call, retries are the
//     budget's call);
//   - a call answered UNAVAILABLE or RESOURCE_EXHAUSTED is retried after a
//     capped exponential backoff with full jitter, never shorter than the
//     server's pushback: the grpc-retry-pushback-ms trailer and the
//     google.rpc.RetryInfo status detail (the longer of the two). A pushback
//     that is negative or malformed, or given twice, means "do not retry",
//     as in gRFC A6, and so does an invalid RetryInfo delay;
//   - each retry spends the retry budget, and none is made when it is empty;
//   - the last error is returned at once when the wait would end after the
//     call's deadline or exceed WithClientMaxDelay, or when attempts are used
//     up; if the context ends during a wait, the context's status error is
//     returned;
//   - the priority in the context (see WithPriority) is sent in the
//     PriorityMetadataKey metadata entry, unless the outgoing metadata
//     already has one.
//
// Do not also enable grpc-go's own retries (a retryPolicy in the service
// config) for the same methods, or attempts multiply. WithClientRetryMethods does
// not apply: every method is retried on those two codes, which servers use to
// say the call was not processed. It reports every invalid option in its
// error.
func UnaryClientInterceptor(opts ...ClientOption) (grpc.UnaryClientInterceptor, error) {
	pol, err := newCliPolicy("UnaryClientInterceptor", opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		ctx, prio := cliOutgoingPriority(ctx)
		if err := pol.admit(prio); err != nil {
			return err
		}
		var trailer metadata.MD
		withTrailer := make([]grpc.CallOption, len(callOpts), len(callOpts)+1)
		copy(withTrailer, callOpts)
		withTrailer = append(withTrailer, grpc.Trailer(&trailer))
		for attempt := 1; ; attempt++ {
			trailer = nil
			err := invoker(ctx, method, req, reply, cc, withTrailer...)
			refused, hint, retry := cliVerdict(err, trailer)
			if !refused {
				pol.record(prio, true)
			}
			if !retry {
				return err
			}
			d, ok := pol.plan(ctx, attempt, hint)
			if !ok {
				return err
			}
			if werr := pol.wait(ctx, d); werr != nil {
				return status.FromContextError(werr).Err()
			}
		}
	}, nil
}

// StreamClientInterceptor returns a gRPC stream client interceptor with the
// throttle, budget, backoff, pushback and priority propagation of
// UnaryClientInterceptor, except that only the creation of the stream is
// retried: once a stream exists, messages may have been sent, so an error on
// it is the caller's to handle. (A creation error has no trailer, so only a
// RetryInfo detail can carry the server's pushback.) A stream counts as accepted by the server
// when it delivers a message or ends with a code other than UNAVAILABLE or
// RESOURCE_EXHAUSTED, and as refused otherwise (also when it is abandoned
// before either). It reports every invalid option in its error.
func StreamClientInterceptor(opts ...ClientOption) (grpc.StreamClientInterceptor, error) {
	pol, err := newCliPolicy("StreamClientInterceptor", opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		ctx, prio := cliOutgoingPriority(ctx)
		if err := pol.admit(prio); err != nil {
			return nil, err
		}
		for attempt := 1; ; attempt++ {
			cs, err := streamer(ctx, desc, cc, method, callOpts...)
			if err == nil {
				return &cliStream{ClientStream: cs, pol: pol, prio: prio}, nil
			}
			refused, hint, retry := cliVerdict(err, nil)
			if !refused {
				pol.record(prio, true)
			}
			if !retry {
				return nil, err
			}
			d, ok := pol.plan(ctx, attempt, hint)
			if !ok {
				return nil, err
			}
			if werr := pol.wait(ctx, d); werr != nil {
				return nil, status.FromContextError(werr).Err()
			}
		}
	}, nil
}

// cliStream tells the throttle how a created stream fared, once.
type cliStream struct {
	grpc.ClientStream
	pol  *cliPolicy
	prio shed.Priority
	once sync.Once
}

// RecvMsg receives a message, recording the server's verdict on the stream
// the first time one is known.
func (s *cliStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil || errors.Is(err, io.EOF) {
		s.once.Do(func() { s.pol.record(s.prio, true) })
	} else {
		s.once.Do(func() { s.pol.record(s.prio, !cliRefusal(status.Code(err))) })
	}
	return err
}

// cliOutgoingPriority returns ctx with the context's priority in the
// outgoing metadata (unless the metadata already has one), and the priority
// the throttle accounts the call under: the metadata's, read as the server
// reads it (readPriority), if there is one, else the context's, else
// shed.Critical.
func cliOutgoingPriority(ctx context.Context) (context.Context, shed.Priority) {
	md, _ := metadata.FromOutgoingContext(ctx)
	if vs := md.Get(PriorityMetadataKey); len(vs) > 0 {
		return ctx, readPriority(vs)
	}
	p, ok := PriorityFrom(ctx)
	if !ok {
		return ctx, shed.Critical
	}
	return metadata.AppendToOutgoingContext(ctx, PriorityMetadataKey, p.String()), p
}

// cliRefusal reports whether a code is an overload refusal.
func cliRefusal(c codes.Code) bool {
	return c == codes.Unavailable || c == codes.ResourceExhausted
}

// cliVerdict reads the outcome of an attempt: whether the server refused it
// for overload, the server's retry time, and whether to retry at all.
func cliVerdict(err error, trailer metadata.MD) (refused bool, hint time.Duration, retry bool) {
	if err == nil {
		return false, 0, false
	}
	st := status.Convert(err)
	if !cliRefusal(st.Code()) {
		return false, 0, false
	}
	hint, retry = cliPushback(trailer.Get(RetryPushbackTrailer))
	if !retry {
		return true, 0, false
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.RetryInfo)
		if !ok || info.GetRetryDelay() == nil {
			continue
		}
		if info.GetRetryDelay().CheckValid() != nil || info.GetRetryDelay().AsDuration() < 0 {
			return true, 0, false
		}
		hint = max(hint, info.GetRetryDelay().AsDuration())
		break
	}
	return true, hint, true
}

// cliPushback reads the values of a grpc-retry-pushback-ms trailer (gRFC
// A6): none means no hint; exactly one non-negative 32-bit decimal integer
// without unnecessary leading zeros is the wait in milliseconds; anything
// else (negative, malformed, several values) means the server asks not to be
// retried.
func cliPushback(vals []string) (d time.Duration, retry bool) {
	switch len(vals) {
	case 0:
		return 0, true
	case 1:
	default:
		return 0, false
	}
	v := vals[0]
	if v == "" || len(v) > 10 || (len(v) > 1 && v[0] == '0') {
		return 0, false
	}
	var ms int64
	for i := range len(v) {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		ms = ms*10 + int64(c-'0')
	}
	if ms > math.MaxInt32 {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}
