package interceptors

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// srvOK answers 200 "ok".
var srvOK = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })

// srvServe serves h on a real listener (127.0.0.1:0) for the test.
func srvServe(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// srvGet sends a GET with the given headers (name, value pairs) through the
// standard client and returns the response with its body read.
func srvGet(t *testing.T, url string, kv ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Add(kv[i], kv[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// srvField is one member of a parsed RateLimit or RateLimit-Policy field.
type srvField struct {
	name string
	a, b int64
}

// srvParseField parses a RateLimit-Policy (params q, w) or RateLimit
// (params r, t) field with httpsfv, failing on anything unexpected.
func srvParseField(t *testing.T, vs []string, pa, pb string) []srvField {
	t.Helper()
	list, err := httpsfv.UnmarshalList(vs)
	if err != nil {
		t.Fatalf("field %q does not parse: %v", vs, err)
	}
	var out []srvField
	for _, m := range list {
		it, ok := m.(httpsfv.Item)
		if !ok {
			t.Fatalf("member %v is not an Item", m)
		}
		name, ok := it.Value.(string)
		if !ok {
			t.Fatalf("member %v is not named by a String", it.Value)
		}
		a, okA := it.Params.Get(pa)
		b, okB := it.Params.Get(pb)
		if !okA || !okB || len(it.Params.Names()) != 2 {
			t.Fatalf("member %q: params %v, want exactly %s and %s", name, it.Params.Names(), pa, pb)
		}
		out = append(out, srvField{name, a.(int64), b.(int64)})
	}
	return out
}

func srvProblem(t *testing.T, resp *http.Response, body []byte) Problem {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != ProblemContentType {
		t.Fatalf("Content-Type %q, want %q", ct, ProblemContentType)
	}
	var p Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("problem body %q: %v", body, err)
	}
	if p.Status != resp.StatusCode {
		t.Errorf("problem status %d, response %d", p.Status, resp.StatusCode)
	}
	return p
}

func TestHTTPRateLimitTiers(t *testing.T) {
	clk := clock.NewManual(srvT0) // 03:04:05: 55 s before the next minute
	perIP, err := ratelimit.New(ratelimit.FixedWindow, ratelimit.Limit{Rate: 3, Period: time.Minute}, ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	perKey, err := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 1, Period: 2 * time.Second, Burst: 2}, ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	ip, err := NewClientIP()
	if err != nil {
		t.Fatal(err)
	}
	apiKey, err := APIKey("X-API-Key")
	if err != nil {
		t.Fatal(err)
	}
	mw, err := RateLimitMiddleware([]HTTPQuota{
		{Name: "per-ip", Limiter: perIP, Key: ip.HTTPKey},
		{Name: "per-key", Limiter: perKey, Key: apiKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := srvServe(t, mw(srvOK))

	steps := []struct {
		advance    time.Duration
		status     int
		rl         []srvField
		retryAfter string
		violated   []string
	}{
		{0, 200, []srvField{{"per-ip", 2, 55}, {"per-key", 1, 2}}, "", nil},
		{0, 200, []srvField{{"per-ip", 1, 55}, {"per-key", 0, 4}}, "", nil},
		// per-key is empty: the next token in 2 s; per-ip spends nothing.
		{0, 429, []srvField{{"per-ip", 1, 55}, {"per-key", 0, 2}}, "2", []string{"per-key"}},
		// 1.5 s later the token is 0.5 s away: rounded up to 1 s.
		{1500 * time.Millisecond, 429, []srvField{{"per-ip", 1, 54}, {"per-key", 0, 1}}, "1", []string{"per-key"}},
		// At 03:04:07 the token is there; the bucket is full again 4 s later.
		{500 * time.Millisecond, 200, []srvField{{"per-ip", 0, 53}, {"per-key", 0, 4}}, "", nil},
		// per-ip's window is spent until 03:05:00, 51 s after 03:04:09.
		{2 * time.Second, 429, []srvField{{"per-ip", 0, 51}, {"per-key", 1, 2}}, "51", []string{"per-ip"}},
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		resp, body := srvGet(t, srv.URL, "X-API-Key", "secret-1")
		if resp.StatusCode != s.status {
			t.Fatalf("step %d: status %d, want %d (%s)", i, resp.StatusCode, s.status, body)
		}
		pol := srvParseField(t, resp.Header.Values(RateLimitPolicyHeader), "q", "w")
		if want := []srvField{{"per-ip", 3, 60}, {"per-key", 2, 4}}; !srvEqualFields(pol, want) {
			t.Errorf("step %d: RateLimit-Policy %v, want %v", i, pol, want)
		}
		if rl := srvParseField(t, resp.Header.Values(RateLimitHeader), "r", "t"); !srvEqualFields(rl, s.rl) {
			t.Errorf("step %d: RateLimit %v, want %v", i, rl, s.rl)
		}
		if got := resp.Header.Get(RetryAfterHeader); got != s.retryAfter {
			t.Errorf("step %d: Retry-After %q, want %q", i, got, s.retryAfter)
		}
		if s.status == 429 {
			p := srvProblem(t, resp, body)
			if p.Type != ProblemQuotaExceeded || strings.Join(p.ViolatedPolicies, ",") != strings.Join(s.violated, ",") {
				t.Errorf("step %d: problem %+v", i, p)
			}
		} else if string(body) != "ok" {
			t.Errorf("step %d: body %q", i, body)
		}
	}
}

func srvEqualFields(a, b []srvField) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestHTTPRetryAfterJitterOnlyAdds(t *testing.T) {
	clk := clock.NewManual(srvT0)
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 4, Period: time.Second, Burst: 1}, ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	h, err := HeaderKey("X-Tenant")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		u    float64
		want string
	}{
		{0, "1"},     // 250 ms → 1 s
		{0.5, "2"},   // 250 ms + 1 s
		{0.999, "3"}, // 250 ms + 1.998 s
	} {
		mw, err := RateLimitMiddleware([]HTTPQuota{{Name: "t", Limiter: lim, Key: h}},
			WithRetryJitter(2*time.Second), WithJitterSource(func() float64 { return tc.u }))
		if err != nil {
			t.Fatal(err)
		}
		srv := srvServe(t, mw(srvOK))
		clk.Advance(time.Second)
		if resp, _ := srvGet(t, srv.URL, "X-Tenant", "a"); resp.StatusCode != 200 {
			t.Fatalf("first: %d", resp.StatusCode)
		}
		resp, body := srvGet(t, srv.URL, "X-Tenant", "a")
		if resp.StatusCode != 429 || resp.Header.Get(RetryAfterHeader) != tc.want {
			t.Errorf("u=%v: %d Retry-After %q, want 429 %q", tc.u, resp.StatusCode, resp.Header.Get(RetryAfterHeader), tc.want)
		}
		if p := srvProblem(t, resp, body); p.RetryAfter != int64(tc.want[0]-'0') {
			t.Errorf("problem retry-after %d", p.RetryAfter)
		}
	}
}

func TestHTTPBadKeys(t *testing.T) {
	lim, err := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 100, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	apiKey, err := APIKey("Authorization")
	if err != nil {
		t.Fatal(err)
	}
	mw, err := RateLimitMiddleware([]HTTPQuota{{Name: "key", Limiter: lim, Key: apiKey}})
	if err != nil {
		t.Fatal(err)
	}
	srv := srvServe(t, mw(srvOK))
	for name, kv := range map[string][]string{
		"missing":  nil,
		"empty":    {"Authorization", "Bearer "},
		"repeated": {"Authorization", "a", "Authorization", "b"},
		"huge":     {"Authorization", "Bearer " + strings.Repeat("k", 64<<10)},
		"spaces":   {"Authorization", "Bearer a b"},
		"binary":   {"Authorization", "Bearer \x80\x81"},
	} {
		resp, body := srvGet(t, srv.URL, kv...)
		if resp.StatusCode != 400 {
			t.Errorf("%s: status %d, want 400", name, resp.StatusCode)
			continue
		}
		p := srvProblem(t, resp, body)
		if strings.Contains(string(body), "kkkk") || strings.Contains(string(body), "Bearer") {
			t.Errorf("%s: the problem echoes the input: %s", name, body)
		}
		if p.Title == "" || resp.Header.Get(RateLimitPolicyHeader) == "" {
			t.Errorf("%s: problem %+v, policy %q", name, p, resp.Header.Get(RateLimitPolicyHeader))
		}
	}
	if resp, body := srvGet(t, srv.URL, "Authorization", "Bearer abc"); resp.StatusCode != 200 {
		t.Errorf("good key: %d %s", resp.StatusCode, body)
	}
}

func TestHTTPBadForwardedFor(t *testing.T) {
	lim, err := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 100, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ip, err := NewClientIP(WithIPTrustedProxies("127.0.0.0/8", "::1"))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := RateLimitMiddleware([]HTTPQuota{{Name: "ip", Limiter: lim, Key: ip.HTTPKey}})
	if err != nil {
		t.Fatal(err)
	}
	srv := srvServe(t, mw(srvOK))
	for name, xff := range map[string]string{
		"huge":    strings.Repeat("1.2.3.4, ", 100<<10/9),
		"hops":    strings.Repeat("127.0.0.1,", MaxForwardedHops+1),
		"garbage": "%%%",
	} {
		resp, body := srvGet(t, srv.URL, "X-Forwarded-For", xff)
		if resp.StatusCode != 400 {
			t.Errorf("%s: %d, want 400", name, resp.StatusCode)
			continue
		}
		srvProblem(t, resp, body)
	}
	if resp, _ := srvGet(t, srv.URL, "X-Forwarded-For", "198.51.100.1"); resp.StatusCode != 200 {
		t.Errorf("good header: %d", resp.StatusCode)
	}
}

func TestHTTPStoreErrors(t *testing.T) {
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 10, Period: time.Second}, ratelimit.WithStore(srvFailingStore{}))
	if err != nil {
		t.Fatal(err)
	}
	q := []HTTPQuota{{Name: "q", Limiter: lim, Key: func(*http.Request) (string, error) { return "k", nil }}}
	closed, err := RateLimitMiddleware(q, WithStoreErrorRetry(1200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	resp, body := srvGet(t, srvServe(t, closed(srvOK)).URL)
	if resp.StatusCode != 503 || resp.Header.Get(RetryAfterHeader) != "2" {
		t.Fatalf("fail closed: %d Retry-After %q", resp.StatusCode, resp.Header.Get(RetryAfterHeader))
	}
	if p := srvProblem(t, resp, body); p.Type != ProblemReducedCapacity {
		t.Errorf("problem %+v", p)
	}
	open, err := RateLimitMiddleware(q, WithFailOpen(true))
	if err != nil {
		t.Fatal(err)
	}
	resp, body = srvGet(t, srvServe(t, open(srvOK)).URL)
	if resp.StatusCode != 200 || string(body) != "ok" || resp.Header.Get(RateLimitHeader) != "" {
		t.Fatalf("fail open: %d %q RateLimit %q", resp.StatusCode, body, resp.Header.Get(RateLimitHeader))
	}
}

// A store full of other keys refuses a new one: not the new key's quota, so
// 503 with the limiter's retry hint and no invented RateLimit numbers, and
// WithFailOpen does not lift it (it is the defence against key sprays).
func TestHTTPTooManyKeysIsReducedCapacity(t *testing.T) {
	clk := clock.NewManual(srvT0)
	lim, err := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 5},
		ratelimit.WithClock(clk), ratelimit.WithMaxKeys(1))
	if err != nil {
		t.Fatal(err)
	}
	h, err := HeaderKey("X-Tenant")
	if err != nil {
		t.Fatal(err)
	}
	mw, err := RateLimitMiddleware([]HTTPQuota{{Name: "t", Limiter: lim, Key: h}}, WithFailOpen(true))
	if err != nil {
		t.Fatal(err)
	}
	srv := srvServe(t, mw(srvOK))
	if resp, _ := srvGet(t, srv.URL, "X-Tenant", "a"); resp.StatusCode != 200 {
		t.Fatalf("a: %d", resp.StatusCode)
	}
	// The store is full of a key that is still limited: b is refused with
	// the limiter's hint (one unit of a 1/hour limit: 3600 s).
	resp, body := srvGet(t, srv.URL, "X-Tenant", "b")
	if resp.StatusCode != 503 || resp.Header.Get(RetryAfterHeader) != "3600" || resp.Header.Get(RateLimitHeader) != "" {
		t.Fatalf("b: %d Retry-After %q RateLimit %q %s", resp.StatusCode, resp.Header.Get(RetryAfterHeader), resp.Header.Get(RateLimitHeader), body)
	}
	if p := srvProblem(t, resp, body); p.Type != ProblemReducedCapacity || len(p.ViolatedPolicies) != 0 {
		t.Errorf("problem %+v", p)
	}
}

func TestHTTPGate(t *testing.T) {
	gate, releases := srvNewGate(t, 1)
	mw, err := GateMiddleware(gate, WithOverloadRetry(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	entered, stop := make(chan struct{}), make(chan struct{})
	var code = make(chan int, 1)
	srv := srvServe(t, mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			close(entered)
			<-stop
		}
		select {
		case c := <-code:
			w.WriteHeader(c)
		default:
			_, _ = io.WriteString(w, "ok")
		}
	})))
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(srv.URL + "/block")
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	resp, body := srvGet(t, srv.URL)
	if resp.StatusCode != 503 || resp.Header.Get(RetryAfterHeader) != "2" {
		t.Fatalf("full gate: %d Retry-After %q", resp.StatusCode, resp.Header.Get(RetryAfterHeader))
	}
	if p := srvProblem(t, resp, body); p.Type != ProblemReducedCapacity {
		t.Errorf("problem %+v", p)
	}
	close(stop)
	<-done
	if r := <-releases; r != metrics.Success {
		t.Errorf("blocked request released %v", r)
	}
	for _, tc := range []struct {
		status int
		want   metrics.GateRelease
	}{
		{200, metrics.Success},
		{404, metrics.Success},
		{500, metrics.Success},
		{503, metrics.Dropped},
		{504, metrics.Dropped},
		{429, metrics.Dropped},
	} {
		code <- tc.status
		if resp, _ := srvGet(t, srv.URL); resp.StatusCode != tc.status {
			t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
		}
		if r := <-releases; r != tc.want {
			t.Errorf("status %d: released %v, want %v", tc.status, r, tc.want)
		}
	}
}

// A classifier that panics must not leak the token.
func TestHTTPClassifierPanicReleasesToken(t *testing.T) {
	gate, releases := srvNewGate(t, 1)
	mw, err := GateMiddleware(gate, WithHTTPClassifier(func(*http.Request, int) Outcome { panic("classifier") }))
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	func() {
		defer func() {
			if r := recover(); r != "classifier" {
				t.Errorf("recovered %v, want the classifier's panic", r)
			}
		}()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}()
	if r := <-releases; r != metrics.Ignored || gate.InFlight() != 0 {
		t.Errorf("released %v, in flight %d", r, gate.InFlight())
	}
}

func TestHTTPGatePanicAndCancel(t *testing.T) {
	gate, releases := srvNewGate(t, 1)
	mw, err := GateMiddleware(gate)
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	func() {
		defer func() { _ = recover() }()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}()
	if r := <-releases; r != metrics.Ignored || gate.InFlight() != 0 {
		t.Errorf("panic: released %v, in flight %d", r, gate.InFlight())
	}
	ctx, cancel := context.WithCancel(context.Background())
	h = mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { cancel() }))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil).WithContext(ctx))
	if r := <-releases; r != metrics.Ignored {
		t.Errorf("client gone: released %v, want Ignored", r)
	}
}

func TestHTTPShedByPriority(t *testing.T) {
	gate, releases := srvNewGate(t, 2)
	s, err := shed.New(gate, shed.WithClock(clock.NewManual(srvT0)), shed.WithReserve(0.5))
	if err != nil {
		t.Fatal(err)
	}
	var users []uint64
	mw, err := ShedMiddleware(s, WithHTTPUser(func(r *http.Request) uint64 {
		u := shed.UserHash(r.Header.Get("X-User"))
		users = append(users, u)
		return u
	}))
	if err != nil {
		t.Fatal(err)
	}
	entered, stop := make(chan struct{}), make(chan struct{})
	srv := srvServe(t, mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			close(entered)
			<-stop
		}
	})))
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(srv.URL + "/block")
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	resp, body := srvGet(t, srv.URL, PriorityHeader, "sheddable", "X-User", "u1")
	if resp.StatusCode != 503 || resp.Header.Get(RetryAfterHeader) == "" {
		t.Fatalf("sheddable: %d Retry-After %q", resp.StatusCode, resp.Header.Get(RetryAfterHeader))
	}
	if p := srvProblem(t, resp, body); !strings.Contains(p.Detail, "priority") {
		t.Errorf("problem %+v", p)
	}
	for _, kv := range [][]string{{PriorityHeader, "critical_plus"}, {PriorityHeader, strings.Repeat("x", 100)}, nil} {
		if resp, _ := srvGet(t, srv.URL, kv...); resp.StatusCode != 200 {
			t.Errorf("priority %q: %d", kv, resp.StatusCode)
		}
		<-releases
	}
	close(stop)
	<-done
	<-releases
	if len(users) != 5 || users[1] != shed.UserHash("u1") {
		t.Errorf("users %v", users)
	}
}

func TestHTTPConstructorErrors(t *testing.T) {
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 1, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	other, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 1, Period: time.Second}, ratelimit.WithStore(srvFailingStore{}))
	if err != nil {
		t.Fatal(err)
	}
	k := func(*http.Request) (string, error) { return "k", nil }
	for name, f := range map[string]func() error{
		"no quotas":   func() error { _, err := RateLimitMiddleware(nil); return err },
		"nil limiter": func() error { _, err := RateLimitMiddleware([]HTTPQuota{{Name: "a", Key: k}}); return err },
		"nil key":     func() error { _, err := RateLimitMiddleware([]HTTPQuota{{Name: "a", Limiter: lim}}); return err },
		"empty name":  func() error { _, err := RateLimitMiddleware([]HTTPQuota{{Limiter: lim, Key: k}}); return err },
		"long name": func() error {
			_, err := RateLimitMiddleware([]HTTPQuota{{strings.Repeat("n", 65), lim, k}})
			return err
		},
		"mixed stores": func() error { _, err := RateLimitMiddleware([]HTTPQuota{{"a", lim, k}, {"b", other, k}}); return err },
		"grpc option": func() error {
			_, err := RateLimitMiddleware([]HTTPQuota{{"a", lim, k}}, ServerOption(WithGRPCUser(nil)))
			return err
		},
		"nil gate": func() error { _, err := GateMiddleware(nil); return err },
		"shed option": func() error {
			_, err := GateMiddleware(nil, ServerOption(WithHTTPPriority(HeaderPriority)))
			return err
		},
		"nil shedder":   func() error { _, err := ShedMiddleware(nil); return err },
		"nil source":    func() error { _, err := ShedMiddleware(nil, WithJitterSource(nil)); return err },
		"bad overload":  func() error { _, err := ShedMiddleware(nil, WithOverloadRetry(-time.Second)); return err },
		"nil http user": func() error { _, err := ShedMiddleware(nil, WithHTTPUser(nil)); return err },
	} {
		if err := f(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	mw, err := RateLimitMiddleware([]HTTPQuota{{"a", lim, k}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Error("wrapping a nil handler did not panic")
		}
	}()
	mw(nil)
}

// srvNopWriter is a ResponseWriter that keeps nothing but its header map,
// cleared between requests, so allocation counts are the middleware's own.
type srvNopWriter struct{ h http.Header }

func (w *srvNopWriter) Header() http.Header         { return w.h }
func (w *srvNopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *srvNopWriter) WriteHeader(int)             {}

func TestHTTPRateLimitAllocs(t *testing.T) {
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 1 << 30, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lim2, err := ratelimit.New(ratelimit.FixedWindow, ratelimit.Limit{Rate: 1 << 30, Period: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h, err := HeaderKey("X-Tenant")
	if err != nil {
		t.Fatal(err)
	}
	user, err := UserKey(func(context.Context) (string, bool) { return "alice", true })
	if err != nil {
		t.Fatal(err)
	}
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	one, err := RateLimitMiddleware([]HTTPQuota{{"tenant", lim, h}})
	if err != nil {
		t.Fatal(err)
	}
	two, err := RateLimitMiddleware([]HTTPQuota{{"tenant", lim, h}, {"user", lim2, user}})
	if err != nil {
		t.Fatal(err)
	}
	gate, err := adaptive.New(adaptive.Fixed(1 << 20))
	if err != nil {
		t.Fatal(err)
	}
	g, err := GateMiddleware(gate)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("X-Tenant", "acme")
	w := &srvNopWriter{h: http.Header{}}
	for name, handler := range map[string]http.Handler{
		"rate limit, 1 tier":  one(noop),
		"rate limit, 2 tiers": two(noop),
		"gate":                g(noop),
	} {
		handler.ServeHTTP(w, req)
		allocs := testing.AllocsPerRun(1000, func() {
			clear(w.h)
			handler.ServeHTTP(w, req)
		})
		t.Logf("%s: %.1f allocs per admitted request", name, allocs)
		if allocs > 6 {
			t.Errorf("%s: %.1f allocs per request, want at most 6", name, allocs)
		}
	}
}

// srvPolicyStore decides every request as a failed store's failure policy
// does (redisstore with Redis down), with retry the fail-closed hint.
type srvPolicyStore struct {
	src   ratelimit.Source
	retry time.Duration
	local *ratelimit.MemoryStore // for SourceFailLocal
}

func (s srvPolicyStore) Apply(ctx context.Context, now time.Time, reqs []ratelimit.Request) error {
	if s.src == ratelimit.SourceFailLocal {
		if err := s.local.Apply(ctx, now, reqs); err != nil {
			return err
		}
	}
	for i := range reqs {
		r := &reqs[i]
		switch s.src {
		case ratelimit.SourceFailLocal:
		case ratelimit.SourceFailOpen:
			r.Result = ratelimit.Result{Allowed: true, Limit: r.Policy.Limit().Burst}
		default:
			r.Result = ratelimit.Result{Limit: r.Policy.Limit().Burst, RetryAfter: s.retry}
		}
		r.Result.Source = s.src
	}
	return nil
}

// TestHTTPStorePolicies: a failed store's decisions on the wire. Fail
// closed is 503 with the policy's retry time and the reduced-capacity
// problem, never a quota refusal, and WithFailOpen admits it; fail open is
// admitted without a RateLimit field (no invented r=0;t=0); fail local is
// decided by the local copy of the limit, whose numbers the field reports.
func TestHTTPStorePolicies(t *testing.T) {
	clk := clock.NewManual(srvT0)
	key := func(*http.Request) (string, error) { return "k", nil }
	for _, tc := range []struct {
		src      ratelimit.Source
		failOpen bool
		status   int
		retry    string
		rl       string
	}{
		{ratelimit.SourceFailClosed, false, 503, "2", ""},
		{ratelimit.SourceFailClosed, true, 200, "", ""},
		{ratelimit.SourceFailOpen, false, 200, "", ""},
		{ratelimit.SourceFailLocal, false, 200, "", `"per-ip";r=1;t=1, "per-tenant";r=99;t=1`},
	} {
		t.Run(fmt.Sprintf("%v/failopen=%v", tc.src, tc.failOpen), func(t *testing.T) {
			local, _ := ratelimit.NewMemoryStore(100)
			st := srvPolicyStore{src: tc.src, retry: 1500 * time.Millisecond, local: local}
			perIP, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 2, Period: time.Second}, ratelimit.WithStore(st), ratelimit.WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			perTenant, err := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 100, Period: time.Minute}, ratelimit.WithStore(st), ratelimit.WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			var opts []RateLimitMiddlewareOption
			if tc.failOpen {
				opts = append(opts, WithFailOpen(true))
			}
			mw, err := RateLimitMiddleware([]HTTPQuota{{Name: "per-ip", Limiter: perIP, Key: key}, {Name: "per-tenant", Limiter: perTenant, Key: key}}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			resp, body := srvGet(t, srvServe(t, mw(srvOK)).URL)
			if resp.StatusCode != tc.status || resp.Header.Get(RetryAfterHeader) != tc.retry || resp.Header.Get(RateLimitHeader) != tc.rl {
				t.Fatalf("%d Retry-After %q RateLimit %q (%s), want %d %q %q", resp.StatusCode, resp.Header.Get(RetryAfterHeader),
					resp.Header.Get(RateLimitHeader), body, tc.status, tc.retry, tc.rl)
			}
			if resp.Header.Get(RateLimitPolicyHeader) == "" {
				t.Error("no RateLimit-Policy")
			}
			if tc.status == 503 {
				if p := srvProblem(t, resp, body); p.Type != ProblemReducedCapacity || len(p.ViolatedPolicies) != 0 || p.RetryAfter != 2 {
					t.Errorf("problem %+v", p)
				}
			}
		})
	}
	// A local fallback that refuses is the limit's own refusal, per process:
	// 429 naming the policy.
	local, _ := ratelimit.NewMemoryStore(100)
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 1, Period: time.Second},
		ratelimit.WithStore(srvPolicyStore{src: ratelimit.SourceFailLocal, local: local}), ratelimit.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := RateLimitMiddleware([]HTTPQuota{{Name: "per-ip", Limiter: lim, Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	srv := srvServe(t, mw(srvOK))
	srvGet(t, srv.URL)
	resp, body := srvGet(t, srv.URL)
	if resp.StatusCode != 429 || resp.Header.Get(RateLimitHeader) != `"per-ip";r=0;t=1` {
		t.Fatalf("local refusal: %d RateLimit %q %s", resp.StatusCode, resp.Header.Get(RateLimitHeader), body)
	}
}
