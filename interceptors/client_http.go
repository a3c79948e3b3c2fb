package interceptors

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice/shed"
)

// Transport is an http.RoundTripper for clients of an overloaded server. It
// sends each request through a base RoundTripper and
//
//   - refuses it locally, with an error matching ErrClientThrottled and
//     without sending it, when the adaptive client throttle says the server
//     has been refusing most requests of its priority (a request whose last
//     answer is 429 or 503, or a transport error while its context is
//     live, counts as refused; the throttle decides once per request,
//     retries are the budget's call);
//   - retries a 429 or 503 answer, if the request is idempotent (its method
//     is one of WithClientRetryMethods, or it has an Idempotency-Key or
//     X-Idempotency-Key header) and its body can be replayed (it has none,
//     or req.GetBody is set), after a capped exponential backoff with full
//     jitter that is never shorter than the server's Retry-After
//     (delta-seconds or HTTP-date), and never zero;
//   - spends the retry budget on each retry, and makes none when it is empty;
//   - gives up at once, returning the last answer as is, when the wait would
//     end after the request context's deadline or exceed WithClientMaxDelay, or
//     when attempts are used up;
//   - sets the PriorityHeader from the context (see WithPriority), unless the
//     request already has one.
//
// A discarded answer's body is drained (up to a bound) and closed, so its
// connection can be reused. Other answers and transport errors are returned
// as they are, without retry. If the context ends during a wait, RoundTrip
// returns an error wrapping the context's error. Transport never modifies the
// caller's request. Safe for concurrent use. The zero Transport refuses every
// request with an error; make one with NewTransport.
type Transport struct {
	base http.RoundTripper
	pol  *cliPolicy
}

// NewTransport returns a Transport sending requests through base
// (http.DefaultTransport if nil). It reports every invalid option in its
// error; RoundTrip itself never panics on configuration.
func NewTransport(base http.RoundTripper, opts ...ClientOption) (*Transport, error) {
	pol, err := newCliPolicy("NewTransport", opts)
	if err != nil {
		return nil, err
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{base: base, pol: pol}, nil
}

var _ http.RoundTripper = (*Transport)(nil)

// cliDrainLimit bounds how much of a discarded body is read before closing.
const cliDrainLimit = 64 << 10

// RoundTrip implements http.RoundTripper, with the retries and refusals
// described on Transport.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.pol == nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errors.New("sluice: interceptors.Transport used without NewTransport")
	}
	ctx := req.Context()
	prio := shed.Critical
	send := req
	if vs := req.Header.Values(PriorityHeader); len(vs) > 0 {
		prio = readPriority(vs) // as the server will read it
	} else if p, ok := PriorityFrom(ctx); ok {
		prio = p
		send = req.Clone(ctx)
		send.Header.Set(PriorityHeader, p.String())
	}
	if err := t.pol.admit(prio); err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper always closes the body
		}
		return nil, err
	}
	retryable := t.retryable(req)
	for attempt := 1; ; attempt++ {
		resp, err := t.base.RoundTrip(send)
		if err != nil {
			// A context that ended is the caller's doing, not a refusal.
			t.pol.record(prio, ctx.Err() != nil)
			return nil, err
		}
		if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
			t.pol.record(prio, true)
			return resp, nil
		}
		if !retryable {
			return resp, nil
		}
		hint, _ := cliRetryAfter(resp.Header.Get("Retry-After"), t.pol.clock.Now())
		d, ok := t.pol.plan(ctx, attempt, hint)
		if !ok {
			return resp, nil
		}
		next := send.Clone(ctx)
		if req.GetBody != nil && req.Body != nil && req.Body != http.NoBody {
			body, err := req.GetBody()
			if err != nil {
				return resp, nil
			}
			next.Body = body
		}
		cliDiscard(resp)
		if err := t.pol.wait(ctx, d); err != nil {
			if next.Body != nil {
				next.Body.Close()
			}
			return nil, fmt.Errorf("sluice: %s %s: waiting %v to retry after %s: %w", req.Method, req.URL.Redacted(), d, resp.Status, err)
		}
		send = next
	}
}

// retryable reports whether req may be sent again: idempotent (by method
// or Idempotency-Key) and with a body that can be replayed.
func (t *Transport) retryable(req *http.Request) bool {
	idempotent := t.pol.methods[req.Method] ||
		req.Header.Get("Idempotency-Key") != "" || req.Header.Get("X-Idempotency-Key") != ""
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	return idempotent && replayable
}

// CloseIdleConnections closes the idle connections of the base
// RoundTripper, if it has such a method (as *http.Transport does).
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// cliDiscard drains (up to cliDrainLimit) and closes a response's body.
func cliDiscard(resp *http.Response) {
	if resp.Body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, cliDrainLimit)
	resp.Body.Close()
}

// cliMaxRetryAfter is what an absurdly long Retry-After is cut to: longer
// than any sensible WithClientMaxDelay, and safe from overflow.
const cliMaxRetryAfter = time.Duration(math.MaxInt64 / 2)

// cliRetryAfter reads a Retry-After field value (RFC 9110 §10.2.3): either
// delta-seconds (1*DIGIT) or an HTTP-date, which is turned into the wait from
// now (0 if it has passed); either is cut to cliMaxRetryAfter. Surrounding
// whitespace is allowed. ok is false for anything else: a negative or
// fractional number, a malformed date, an empty value.
func cliRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.Trim(v, " \t")
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		var secs int64
		for i := range len(v) {
			c := v[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			if secs <= int64(cliMaxRetryAfter/time.Second) {
				secs = secs*10 + int64(c-'0')
			}
		}
		if secs > int64(cliMaxRetryAfter/time.Second) {
			return cliMaxRetryAfter, true
		}
		return time.Duration(secs) * time.Second, true
	}
	when, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(0, when.Sub(now)), cliMaxRetryAfter), true
}
