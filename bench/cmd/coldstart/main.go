// Command coldstart replays, in virtual time, a cold gate in front of a
// service that never queues: requests at a constant rate, each taking a
// constant time, so the concurrency the service needs (rate × time) is
// above the gate's initial limit of 20. It prints, per 100 ms, the limit,
// the rejections and the floor the gate has learnt. A perfect gate rejects
// nothing after its first window; issue 15's "I/O service with its CPU
// idle" case showed the default learners rejecting for about a second.
//
//	go run ./cmd/coldstart                 # 1,300/s at 20 ms (26 in flight)
//	go run ./cmd/coldstart -rate 5000 -rtt 20ms
//	go run ./cmd/coldstart -idle 2s           # the gate created 2 s before its first request
package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/gradient"
	"github.com/sluicehq/sluice/vegas"
)

// ev is a request in flight: when it completes, and its token.
type ev struct {
	at  time.Time
	tok adaptive.Token
}

// run drives one gate with alg for 3 s of virtual time: rate arrivals per
// second, each holding its token for svc.
func run(name string, alg adaptive.Algorithm, rate float64, svc, idle time.Duration) {
	c := clock.NewManual(time.Unix(0, 0))
	g, err := adaptive.New(alg, adaptive.WithClock(c))
	if err != nil {
		panic(err)
	}
	c.Advance(idle) // the gate waits for its first caller
	var inflight []ev
	step := time.Duration(float64(time.Second) / rate)
	rej, tot := 0, 0
	t0 := c.Now()
	for i := 0; i < int(rate*3); i++ {
		now := t0.Add(time.Duration(i) * step)
		// release finished
		k := 0
		for _, e := range inflight {
			if !e.at.After(now) {
				c.Set(e.at)
				e.tok.Success()
			} else {
				inflight[k] = e
				k++
			}
		}
		inflight = inflight[:k]
		c.Set(now)
		tot++
		tok, ok := g.TryAcquire()
		if !ok {
			rej++
		} else {
			inflight = append(inflight, ev{now.Add(svc), tok})
		}
		if (i+1)%int(rate/10) == 0 {
			fmt.Printf("%s t=%4dms limit=%3d rejected=%3d/%d floor=%v\n", name, now.Sub(t0).Milliseconds(), g.Limit(), rej, tot, g.Floor())
			rej, tot = 0, 0
		}
	}
}

func main() {
	rate := flag.Float64("rate", 1300, "arrivals per second")
	rtt := flag.Duration("rtt", 20*time.Millisecond, "each request's time in the service")
	idle := flag.Duration("idle", 0, "time between the gate's creation and the first request (a server started before its traffic)")
	flag.Parse()
	if *rate < 10 || *rtt <= 0 {
		fmt.Println("coldstart: want -rate of at least 10 and a positive -rtt")
		return
	}
	run("gradient", gradient.New(), *rate, *rtt, *idle)
	run("vegas", vegas.New(), *rate, *rtt, *idle)
}
