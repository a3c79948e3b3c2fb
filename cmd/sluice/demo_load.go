package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/interceptors"
	"github.com/sluicehq/sluice/shed"
)

// demoArrival is one request of the schedule, sent at the same offset to
// both copies of the service.
type demoArrival struct {
	at   time.Duration
	rpc  bool // gRPC, else HTTP
	prio shed.Priority
	key  int // index into the API keys; 0 is the abusive key
	user int // the end user on whose behalf the request is made
}

// demoPrioShares is the traffic mix by priority: CriticalPlus, Critical,
// SheddablePlus, Sheddable.
var demoPrioShares = [shed.Priorities]float64{0.1, 0.2, 0.3, 0.4}

// demoSchedule draws the open-loop arrivals: a Poisson process whose rate is
// constant within each phase, so that the gaps are exponential and restart
// at each phase boundary (the process is memoryless).
func demoSchedule(cfg *demoConfig) []demoArrival {
	rng := rand.New(rand.NewPCG(cfg.seed, 0x5eed))
	var out []demoArrival
	var phaseStart time.Duration
	for _, ph := range cfg.phases {
		rate := ph.load * cfg.capacity() // per second
		end := phaseStart + ph.dur
		t := phaseStart
		for rate > 0 {
			t += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
			if t >= end {
				break
			}
			a := demoArrival{at: t, rpc: rng.Float64() < cfg.grpcShare}
			u := rng.Float64()
			a.prio = shed.Sheddable
			for p, s := range demoPrioShares {
				if u < s {
					a.prio = shed.Priority(p)
					break
				}
				u -= s
			}
			a.user = rng.IntN(demoUsers)
			if rng.Float64() >= cfg.abuse {
				a.key = 1 + rng.IntN(cfg.keys-1)
			}
			out = append(out, a)
		}
		phaseStart = end
	}
	return out
}

// demoUsers is the number of end users behind the API keys; the shedder
// sheds by user cohort, so that a shed user is shed consistently.
const demoUsers = 1000

func demoUser(i int) string { return fmt.Sprintf("user-%03d", i) }

func demoKey(i int) string { return fmt.Sprintf("demo-key-%02d", i) }

// demoBucket counts the outcomes of one second of one copy: offered by send
// time, everything else by completion time.
type demoBucket struct {
	offered, ok, r429, r503, timeouts, errs, drops int
	done, okBy                                     [shed.Priorities]int
	abuseDone, abuseOK                             int
	lat                                            []time.Duration // of the successes
}

func (b *demoBucket) add(o *demoBucket) {
	b.offered += o.offered
	b.ok += o.ok
	b.r429 += o.r429
	b.r503 += o.r503
	b.timeouts += o.timeouts
	b.errs += o.errs
	b.drops += o.drops
	for p := range b.done {
		b.done[p] += o.done[p]
		b.okBy[p] += o.okBy[p]
	}
	b.abuseDone += o.abuseDone
	b.abuseOK += o.abuseOK
	b.lat = append(b.lat, o.lat...)
}

// p99 returns the 99th percentile latency of the successes in ms, or -1.
func (b *demoBucket) p99() float64 {
	if len(b.lat) == 0 {
		return -1
	}
	l := slices.Clone(b.lat)
	slices.Sort(l)
	return float64(l[(len(l)*99-1)/100]) / float64(time.Millisecond)
}

// demoStats holds one copy's buckets, one per second of the run and a few
// more for requests that finish after it.
type demoStats struct {
	start   time.Time
	mu      sync.Mutex
	buckets []demoBucket
}

func newDemoStats(start time.Time, d time.Duration) *demoStats {
	return &demoStats{start: start, buckets: make([]demoBucket, int(d/time.Second)+3)}
}

func (s *demoStats) bucket(now time.Time) *demoBucket {
	i := min(max(int(now.Sub(s.start)/time.Second), 0), len(s.buckets)-1)
	return &s.buckets[i]
}

type demoOutcome uint8

const (
	demoOK demoOutcome = iota
	demo429
	demo503
	demoTimeout
	demoError
	demoDrop // not sent: the generator had too many requests outstanding
)

func (s *demoStats) offered(now time.Time) {
	s.mu.Lock()
	s.bucket(now).offered++
	s.mu.Unlock()
}

func (s *demoStats) record(a demoArrival, o demoOutcome, lat time.Duration) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bucket(now)
	if a.key == 0 {
		b.abuseDone++
	} else {
		b.done[a.prio]++
	}
	switch o {
	case demoOK:
		b.ok++
		if a.key == 0 {
			b.abuseOK++
		} else {
			b.okBy[a.prio]++
		}
		b.lat = append(b.lat, lat)
	case demo429:
		b.r429++
	case demo503:
		b.r503++
	case demoTimeout:
		b.timeouts++
	case demoDrop:
		b.drops++
	default:
		b.errs++
	}
}

// sum returns the totals of buckets [from, to).
func (s *demoStats) sum(from, to int) demoBucket {
	s.mu.Lock()
	defer s.mu.Unlock()
	var t demoBucket
	for i := max(from, 0); i < min(to, len(s.buckets)); i++ {
		t.add(&s.buckets[i])
	}
	return t
}

// demoClient sends the schedule to one copy with plain clients: no retries,
// no client throttle, so every refusal shows in the counts.
type demoClient struct {
	svc     *demoService
	url     string
	timeout time.Duration
	http    *http.Client
	tr      *http.Transport
	conn    *grpc.ClientConn
	health  healthpb.HealthClient
	stats   *demoStats
	sem     chan struct{} // bounds the requests outstanding
	wg      sync.WaitGroup
}

func newDemoClient(svc *demoService, cfg *demoConfig, stats *demoStats) (*demoClient, error) {
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protos, HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 10000}}
	conn, err := grpc.NewClient(svc.grpcAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &demoClient{
		svc: svc, url: svc.httpURL() + "/work", timeout: cfg.timeout, tr: tr, http: &http.Client{Transport: tr},
		conn: conn, health: healthpb.NewHealthClient(conn), stats: stats,
		sem: make(chan struct{}, cfg.maxOutstanding),
	}, nil
}

// run sends the schedule, each request at its offset from start, until
// the schedule ends or ctx does, and returns once every request is answered.
func (c *demoClient) run(ctx context.Context, start time.Time, sched []demoArrival) {
	defer c.wg.Wait()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for _, a := range sched {
		if d := time.Until(start.Add(a.at)); d > 0 {
			t.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		c.stats.offered(time.Now())
		select {
		case c.sem <- struct{}{}:
		default:
			c.stats.record(a, demoDrop, 0)
			continue
		}
		c.wg.Go(func() {
			defer func() { <-c.sem }()
			begin := time.Now()
			o := c.send(ctx, a)
			c.stats.record(a, o, time.Since(begin))
		})
	}
}

func (c *demoClient) send(ctx context.Context, a demoArrival) demoOutcome {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if a.rpc {
		ctx = metadata.AppendToOutgoingContext(ctx,
			interceptors.PriorityMetadataKey, a.prio.String(),
			"x-api-key", demoKey(a.key), "x-user", demoUser(a.user))
		_, err := c.health.Check(ctx, &healthpb.HealthCheckRequest{})
		switch status.Code(err) {
		case codes.OK:
			return demoOK
		case codes.ResourceExhausted:
			return demo429
		case codes.Unavailable:
			return demo503
		case codes.DeadlineExceeded:
			return demoTimeout
		}
		return demoError
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return demoError
	}
	req.Header.Set(interceptors.PriorityHeader, a.prio.String())
	req.Header.Set(demoAPIKeyHeader, demoKey(a.key))
	req.Header.Set(demoUserHeader, demoUser(a.user))
	resp, err := c.http.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return demoTimeout
	case err != nil:
		return demoError
	case resp.StatusCode == http.StatusOK:
		return demoOK
	case resp.StatusCode == http.StatusTooManyRequests:
		return demo429
	case resp.StatusCode == http.StatusServiceUnavailable:
		return demo503
	}
	return demoError
}

func (c *demoClient) close() {
	c.tr.CloseIdleConnections()
	c.conn.Close()
}
