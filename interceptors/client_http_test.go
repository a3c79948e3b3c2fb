package interceptors

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/shed"
)

// cliHTTPServer is a real HTTP server whose answers a test scripts: answer
// gets the 1-based number of the request and returns its status and
// Retry-After ("" for none). It records what it received.
type cliHTTPServer struct {
	*httptest.Server
	answer func(n int) (code int, retryAfter string)

	mu     sync.Mutex
	hits   int
	bodies []string
	prios  []string
}

func newCliHTTPServer(t *testing.T, answer func(n int) (int, string)) *cliHTTPServer {
	t.Helper()
	s := &cliHTTPServer{answer: answer}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.hits++
		n := s.hits
		s.bodies = append(s.bodies, string(body))
		s.prios = append(s.prios, r.Header.Get(PriorityHeader))
		s.mu.Unlock()
		code, ra := s.answer(n)
		if ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(code)
		io.WriteString(w, http.StatusText(code))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *cliHTTPServer) received() (bodies, prios []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bodies), slices.Clone(s.prios)
}

func (s *cliHTTPServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits
}

func cliPrios(s *cliHTTPServer) []string { _, p := s.received(); return p }

// cliRefuseFirst answers code with retryAfter to the first n requests, 200 after.
func cliRefuseFirst(n, code int, retryAfter string) func(int) (int, string) {
	return func(i int) (int, string) {
		if i <= n {
			return code, retryAfter
		}
		return http.StatusOK, ""
	}
}

// cliClient returns an http.Client over a Transport with opts, closing its
// idle connections at the end of the test.
func cliClient(t *testing.T, base http.RoundTripper, opts ...ClientOption) *http.Client {
	t.Helper()
	tr, err := NewTransport(base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func cliGet(t *testing.T, c *http.Client, ctx context.Context, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestClientTransportHonoursRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name       string
		code       int
		retryAfter func(now time.Time) string
		min        time.Duration
	}{
		{"503 delta-seconds", http.StatusServiceUnavailable, func(time.Time) string { return "2" }, 2 * time.Second},
		{"429 delta-seconds", http.StatusTooManyRequests, func(time.Time) string { return "7" }, 7 * time.Second},
		{"503 IMF-fixdate", http.StatusServiceUnavailable, func(now time.Time) string { return now.Add(5 * time.Second).Format(http.TimeFormat) }, 5 * time.Second},
		{"429 RFC 850 date", http.StatusTooManyRequests, func(now time.Time) string { return now.Add(4 * time.Second).Format(time.RFC850) }, 4 * time.Second},
		{"503 asctime date", http.StatusServiceUnavailable, func(now time.Time) string { return now.Add(3 * time.Second).Format(time.ANSIC) }, 3 * time.Second},
		{"503 date passed", http.StatusServiceUnavailable, func(now time.Time) string { return now.Add(-time.Hour).Format(http.TimeFormat) }, 0},
		{"503 none", http.StatusServiceUnavailable, func(time.Time) string { return "" }, 0},
		{"503 malformed", http.StatusServiceUnavailable, func(time.Time) string { return "soon" }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newCliWaits()
			srv := newCliHTTPServer(t, func(n int) (int, string) {
				if n <= 2 {
					return tc.code, tc.retryAfter(w.clk.Now().UTC())
				}
				return http.StatusOK, ""
			})
			c := cliClient(t, nil, w.opts()...)
			resp := cliGet(t, c, context.Background(), srv.URL)
			if resp.StatusCode != http.StatusOK || srv.count() != 3 {
				t.Fatalf("status %d after %d requests; want 200 after 3", resp.StatusCode, srv.count())
			}
			w.mustHaveWaited(t, 2, tc.min)
		})
	}
}

func TestClientTransportGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter string
		opts       []ClientOption
		deadline   time.Duration // from the clock's now; 0 for none
	}{
		{"wait past the deadline", "60", nil, 10 * time.Second},
		{"wait equal to the deadline", "10", nil, 10 * time.Second},
		{"wait beyond the max delay", "3600", nil, 0},
		{"max delay option", "20", []ClientOption{WithClientMaxDelay(15 * time.Second)}, 0},
		{"one attempt", "1", []ClientOption{WithClientMaxAttempts(1)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newCliHTTPServer(t, cliRefuseFirst(1, http.StatusServiceUnavailable, tc.retryAfter))
			w := newCliWaits()
			c := cliClient(t, nil, w.opts(tc.opts...)...)
			ctx := context.Background()
			if tc.deadline > 0 {
				// The deadline is read against the client's clock: the manual one.
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, w.clk.Now().Add(tc.deadline))
				defer cancel()
			}
			resp := cliGet(t, c, ctx, srv.URL)
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != tc.retryAfter {
				t.Errorf("got %d (Retry-After %q), want the server's 503 as is", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
			if body, err := io.ReadAll(resp.Body); err != nil || string(body) != http.StatusText(http.StatusServiceUnavailable) {
				t.Errorf("body %q, %v: want the last answer's body intact", body, err)
			}
			if srv.count() != 1 || len(w.recorded()) != 0 {
				t.Errorf("%d requests, waits %v; want 1 request and no wait", srv.count(), w.recorded())
			}
		})
	}
	t.Run("deadline leaves time", func(t *testing.T) {
		srv := newCliHTTPServer(t, cliRefuseFirst(1, http.StatusServiceUnavailable, "9"))
		w := newCliWaits()
		c := cliClient(t, nil, w.opts()...)
		ctx, cancel := context.WithDeadline(context.Background(), w.clk.Now().Add(10*time.Second))
		defer cancel()
		if resp := cliGet(t, c, ctx, srv.URL); resp.StatusCode != http.StatusOK || srv.count() != 2 {
			t.Errorf("status %d after %d requests, want 200 after 2", resp.StatusCode, srv.count())
		}
	})
}

func TestClientTransportIdempotentOnly(t *testing.T) {
	type opaque struct{ io.Reader } // a body without GetBody
	for _, tc := range []struct {
		name   string
		method string
		body   func() io.Reader
		header string // Idempotency-Key, if any
		opts   []ClientOption
		hits   int
	}{
		{"GET", http.MethodGet, nil, "", nil, 2},
		{"HEAD", http.MethodHead, nil, "", nil, 2},
		{"OPTIONS", http.MethodOptions, nil, "", nil, 2},
		{"DELETE", http.MethodDelete, nil, "", nil, 2},
		{"PUT with replayable body", http.MethodPut, func() io.Reader { return strings.NewReader("payload") }, "", nil, 2},
		{"PUT with a body that cannot be replayed", http.MethodPut, func() io.Reader { return opaque{strings.NewReader("payload")} }, "", nil, 1},
		{"POST", http.MethodPost, func() io.Reader { return strings.NewReader("payload") }, "", nil, 1},
		{"PATCH", http.MethodPatch, func() io.Reader { return strings.NewReader("payload") }, "", nil, 1},
		{"POST with Idempotency-Key", http.MethodPost, func() io.Reader { return strings.NewReader("payload") }, "k-1", nil, 2},
		{"POST allowed by option", http.MethodPost, func() io.Reader { return strings.NewReader("payload") }, "", []ClientOption{WithClientRetryMethods("POST")}, 2},
		{"GET not in the option", http.MethodGet, nil, "", []ClientOption{WithClientRetryMethods("POST")}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newCliHTTPServer(t, cliRefuseFirst(1, http.StatusTooManyRequests, "1"))
			w := newCliWaits()
			c := cliClient(t, nil, w.opts(tc.opts...)...)
			var body io.Reader
			if tc.body != nil {
				body = tc.body()
			}
			req, err := http.NewRequest(tc.method, srv.URL, body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.header != "" {
				req.Header.Set("Idempotency-Key", tc.header)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if srv.count() != tc.hits {
				t.Errorf("%d requests, want %d", srv.count(), tc.hits)
			}
			if tc.body != nil {
				bodies, _ := srv.received()
				for i, b := range bodies {
					if b != "payload" {
						t.Errorf("request %d carried body %q, want the replayed %q", i+1, b, "payload")
					}
				}
			}
		})
	}
}

func TestClientTransportBudget(t *testing.T) {
	// A server that refuses everything: with a budget of ratio 0.1 saving at
	// most 2, N requests make at most 0.1·N + 2 retries, however many
	// attempts each may make.
	const n, ratio, saved = 200, 0.1, 2
	srv := newCliHTTPServer(t, func(int) (int, string) { return http.StatusServiceUnavailable, "1" })
	budget, err := retry.NewBudget(ratio, saved)
	if err != nil {
		t.Fatal(err)
	}
	w := newCliWaits()
	c := cliClient(t, nil, w.opts(WithClientBudget(budget), WithClientThrottle(nil), WithClientMaxAttempts(5))...)
	for range n {
		resp := cliGet(t, c, context.Background(), srv.URL)
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("status %d, want 503", resp.StatusCode)
		}
		resp.Body.Close()
	}
	retries := srv.count() - n
	if retries > int(ratio*n)+saved || retries < int(ratio*n)-1 {
		t.Errorf("%d retries for %d requests; want about %v·%d, at most %d", retries, n, ratio, n, int(ratio*n)+saved)
	}
	if len(w.recorded()) != retries {
		t.Errorf("%d waits for %d retries", len(w.recorded()), retries)
	}
}

func TestClientTransportThrottle(t *testing.T) {
	// The server refuses everything; the client throttle soon refuses most
	// requests locally, without sending them.
	const n = 300
	srv := newCliHTTPServer(t, func(int) (int, string) { return http.StatusTooManyRequests, "" })
	w := newCliWaits()
	throttle, err := retry.NewThrottle[shed.Priority](retry.WithThrottleSeed(7), retry.WithThrottleClock(w.clk))
	if err != nil {
		t.Fatal(err)
	}
	c := cliClient(t, nil, w.opts(WithClientThrottle(throttle), WithClientMaxAttempts(1))...)
	var local int
	for i := range n {
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req.WithContext(WithPriority(context.Background(), shed.Sheddable)))
		switch {
		case errors.Is(err, ErrClientThrottled):
			local++
			if !strings.Contains(err.Error(), "sheddable") {
				t.Errorf("error %q does not name the priority", err)
			}
		case err != nil:
			t.Fatal(err)
		default:
			resp.Body.Close()
			if i == 0 && resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
	}
	if srv.count()+local != n {
		t.Errorf("%d sent + %d refused locally ≠ %d: a locally refused request was sent", srv.count(), local, n)
	}
	if local < n*3/4 {
		t.Errorf("only %d of %d refused locally while the server refused every request", local, n)
	}
	if p := throttle.RejectProbability(shed.Sheddable); p < 0.9 {
		t.Errorf("reject probability %v, want ≥ 0.9", p)
	}
	// Another priority is accounted separately: nothing was sent under it.
	if p := throttle.RejectProbability(shed.Critical); p != 0 {
		t.Errorf("critical reject probability %v, want 0", p)
	}
}

// cliBody records how much of a body was read and whether it was closed.
type cliBody struct {
	r      io.Reader
	mu     sync.Mutex
	eof    bool
	closed bool
}

func (b *cliBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.mu.Lock()
		b.eof = true
		b.mu.Unlock()
	}
	return n, err
}

func (b *cliBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

// cliRoundTripFunc adapts a function to http.RoundTripper.
type cliRoundTripFunc func(*http.Request) (*http.Response, error)

func (f cliRoundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestClientTransportDrainsDiscarded(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies []*cliBody
	)
	base := cliRoundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		code := http.StatusServiceUnavailable
		if len(bodies) == 2 {
			code = http.StatusOK
		}
		b := &cliBody{r: strings.NewReader(strings.Repeat("x", 10_000))}
		bodies = append(bodies, b)
		return &http.Response{StatusCode: code, Status: strconv.Itoa(code), Header: http.Header{"Retry-After": {"1"}}, Body: b, Request: r}, nil
	})
	w := newCliWaits()
	c := cliClient(t, base, w.opts()...)
	resp := cliGet(t, c, context.Background(), "http://sluice.test/")
	if resp.StatusCode != http.StatusOK || len(bodies) != 3 {
		t.Fatalf("status %d after %d attempts", resp.StatusCode, len(bodies))
	}
	for i, b := range bodies[:2] {
		if !b.eof || !b.closed {
			t.Errorf("discarded body %d: drained %v, closed %v; want both", i, b.eof, b.closed)
		}
	}
	if bodies[2].closed {
		t.Error("the returned body was closed")
	}
}

func TestClientTransportContextEndsDuringWait(t *testing.T) {
	srv := newCliHTTPServer(t, cliRefuseFirst(5, http.StatusServiceUnavailable, "1"))
	w := newCliWaits()
	ctx, cancel := context.WithCancel(context.Background())
	w.before = func(context.Context) error { cancel(); return context.Canceled }
	c := cliClient(t, nil, w.opts()...)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, context.Canceled) || srv.count() != 1 {
		t.Errorf("error %v after %d requests; want context.Canceled after 1", err, srv.count())
	}
}

func TestClientTransportPriority(t *testing.T) {
	srv := newCliHTTPServer(t, func(int) (int, string) { return http.StatusOK, "" })
	c := cliClient(t, nil, WithClientSeed(1))
	ctx := WithPriority(context.Background(), shed.SheddablePlus)

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if req.Header.Get(PriorityHeader) != "" {
		t.Error("the caller's request was modified")
	}

	explicit, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	explicit.Header.Set(PriorityHeader, "CRITICAL_PLUS")
	resp, err = c.Do(explicit)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	resp = cliGet(t, c, context.Background(), srv.URL)
	resp.Body.Close()

	if want := []string{"sheddable_plus", "CRITICAL_PLUS", ""}; !slices.Equal(cliPrios(srv), want) {
		t.Errorf("server saw priorities %q, want %q", cliPrios(srv), want)
	}
}

func TestClientTransportPriorityOnRetries(t *testing.T) {
	srv := newCliHTTPServer(t, cliRefuseFirst(2, http.StatusServiceUnavailable, "1"))
	w := newCliWaits()
	c := cliClient(t, nil, w.opts()...)
	cliGet(t, c, WithPriority(context.Background(), shed.Sheddable), srv.URL)
	if want := []string{"sheddable", "sheddable", "sheddable"}; !slices.Equal(cliPrios(srv), want) {
		t.Errorf("server saw priorities %q, want %q", cliPrios(srv), want)
	}
}

func TestClientTransportBackoffReproducible(t *testing.T) {
	// Without Retry-After the waits are the jittered backoff: within the
	// capped exponential ceiling, and the same for the same seed.
	run := func(seed uint64) []time.Duration {
		srv := newCliHTTPServer(t, func(int) (int, string) { return http.StatusServiceUnavailable, "" })
		w := newCliWaits()
		budget, _ := retry.NewBudget(1, 100)
		for range 100 {
			budget.Request()
		}
		c := cliClient(t, nil, w.opts(WithClientSeed(seed), WithClientBudget(budget), WithClientThrottle(nil), WithClientMaxAttempts(8),
			WithClientBackoff(retry.Backoff{Base: 100 * time.Millisecond, Max: time.Second}))...)
		cliGet(t, c, context.Background(), srv.URL)
		return w.recorded()
	}
	a, b, other := run(3), run(3), run(4)
	if len(a) != 7 {
		t.Fatalf("%d waits, want 7", len(a))
	}
	for k, d := range a {
		if ceil := min(time.Second, 100*time.Millisecond<<k); d <= 0 || d > ceil {
			t.Errorf("retry %d waited %v, want in (0, %v]", k+1, d, ceil)
		}
	}
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different waits: %v, %v", a, b)
	}
	if slices.Equal(a, other) {
		t.Errorf("different seeds, same waits: %v", a)
	}
}

func TestClientTransportErrors(t *testing.T) {
	boom := errors.New("boom")
	var calls int
	base := cliRoundTripFunc(func(*http.Request) (*http.Response, error) { calls++; return nil, boom })
	w := newCliWaits()
	c := cliClient(t, base, w.opts()...)
	_, err := c.Get("http://sluice.test/")
	if !errors.Is(err, boom) || calls != 1 {
		t.Errorf("error %v after %d calls; want boom, not retried", err, calls)
	}
}

func TestClientTransportZeroValue(t *testing.T) {
	body := &cliBody{r: strings.NewReader("x")}
	req, _ := http.NewRequest(http.MethodPut, "http://sluice.test/", body)
	if _, err := new(Transport).RoundTrip(req); err == nil || !strings.Contains(err.Error(), "NewTransport") {
		t.Errorf("zero Transport: error %v, want one pointing at NewTransport", err)
	}
	if !body.closed {
		t.Error("zero Transport left the request body open")
	}
}

func TestClientRetryAfter(t *testing.T) {
	now := cliT0
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"120", 120 * time.Second, true},
		{" 5\t", 5 * time.Second, true},
		{"007", 7 * time.Second, true},
		{"99999999999999999999999", cliMaxRetryAfter, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(90 * time.Second).Format(time.RFC850), 90 * time.Second, true},
		{now.Add(90 * time.Second).Format(time.ANSIC), 90 * time.Second, true},
		{now.Add(-90 * time.Second).Format(http.TimeFormat), 0, true},
		{"Wed, 01 MAY 2200 0:00:00 GMT", cliMaxRetryAfter, true}, // found by FuzzClientRetryAfter
		{"Mon, 01 Jan 0001 00:00:00 GMT", 0, true},
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1.5", 0, false},
		{"1 2", 0, false},
		{"5s", 0, false},
		{"tomorrow", 0, false},
		{"Wed, 31 Feb 2026 00:00:00 GMT", 0, false},
	} {
		got, ok := cliRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("cliRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
