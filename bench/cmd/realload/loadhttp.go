package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// httpLoad drives one HTTP server with vegeta.
type httpLoad struct {
	url     string
	timeout time.Duration
}

// newHTTPClient is the client of both the load and the lone client: keep-alive,
// up to 10000 idle connections per host (vegeta's default), the client timeout.
func newHTTPClient(timeout time.Duration) *http.Client {
	d := &net.Dialer{KeepAlive: 30 * time.Second}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:         d.DialContext,
			MaxIdleConnsPerHost: vegeta.DefaultConnections,
		},
	}
}

// attack runs vegeta against the server with pacer p for du (open loop when
// p is a profile; closed loop with `workers` workers when workers > 0 and p
// is vegeta's zero ConstantPacer, infinite rate) and returns every request.
// It returns once every request has been answered or has timed out.
func (l httpLoad) attack(p vegeta.Pacer, du time.Duration, workers uint64) []sample {
	client := newHTTPClient(l.timeout)
	defer client.CloseIdleConnections()
	opts := []func(*vegeta.Attacker){vegeta.Client(client)}
	if workers > 0 {
		opts = append(opts, vegeta.Workers(workers), vegeta.MaxWorkers(workers))
	}
	a := vegeta.NewAttacker(opts...)
	tr := vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodGet, URL: l.url})
	began := time.Now()
	var out []sample
	for r := range a.Attack(tr, p, du, "realload") {
		out = append(out, sample{at: r.Timestamp.Sub(began), lat: r.Latency, out: classifyHTTP(r.Code, r.Error)})
	}
	return out
}

// classifyHTTP sorts a vegeta result: 200 is success, 503 and 429 are
// refusals, an error that says the client's deadline passed is a timeout.
func classifyHTTP(code uint16, errText string) outcome {
	switch {
	case code == http.StatusOK:
		return ok
	case code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests:
		return refused
	case code == 0 && (strings.Contains(errText, "Client.Timeout") || strings.Contains(errText, "deadline exceeded")):
		return timeout
	}
	return failed
}

// lone sends n requests one at a time from a fresh client, as a caller
// arriving after the storm would.
func (l httpLoad) lone(n int) []sample {
	client := newHTTPClient(l.timeout)
	defer client.CloseIdleConnections()
	out := make([]sample, 0, n)
	for range n {
		start := time.Now()
		code, err := l.get(client)
		s := sample{lat: time.Since(start)}
		switch {
		case err == nil:
			s.out = classifyHTTP(code, "")
		case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
			s.out = timeout
		default:
			s.out = failed
		}
		out = append(out, s)
	}
	return out
}

func (l httpLoad) get(client *http.Client) (uint16, error) {
	resp, err := client.Get(l.url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	return uint16(resp.StatusCode), nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
