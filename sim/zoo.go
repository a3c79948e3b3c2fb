package sim

import (
	"fmt"
	"strings"
	"time"
)

// The zoo is a set of structurally different servers, each with a real
// capacity, and of incidents to run on every one of them, so that a policy
// tuned on one server model is also judged on the others. A cell of the
// zoo is a server model, a core count and a service-time distribution;
// every cell has the same capacity, ZooCapacity, so that the offered
// rates, and the cost of simulating them, are alike: the mean service time
// grows with the cores (cores × 1 ms). The SLO is 10 × the mean service
// time plus the mean dependency wait; clients give up at 3× the SLO, so
// that the p99 of successes may show a transient up to 2× the SLO (the
// target after a change of capacity) and beyond.
// Rejections cost no CPU here, so that capacity is exact.

// ZooCapacity is the nominal capacity of every zoo server, in requests per
// second.
const ZooCapacity = 1000

// ZooCores are the core counts of the zoo.
var ZooCores = []int{1, 4, 16, 64}

// ZooModel is a server structure of the zoo, built for any core count and
// service-time distribution by Server.
type ZooModel struct {
	Name        string // e.g. "pool", or a combination such as "pool+wait+gc"
	Description string // what the model is, in a few words
	base        Model
	wait        bool // a fixed dependency wait of 20 × the mean service time
	gc          bool // GC pauses of 5 ms every 1 s ± 250 ms
}

// ZooModels returns the zoo's server models: ps, pool, fifo, fixed-wait
// (ps with a fixed dependency wait) and gc (ps with GC pauses). FindZooModels
// also builds combinations.
func ZooModels() []ZooModel {
	return []ZooModel{
		{Name: "ps", Description: "processor sharing with contention (κ = 0.0002)", base: PS},
		{Name: "pool", Description: "4×cores worker threads behind a FIFO accept queue; workers share the cores (PS with contention)", base: Pool},
		{Name: "fifo", Description: "M/M/c: FIFO queue, each request runs to completion on one core", base: FIFO},
		{Name: "fixed-wait", Description: "ps, and after the CPU a fixed dependency wait of 20× the mean CPU time that holds the slot but no CPU", base: PS, wait: true},
		{Name: "gc", Description: "ps with stop-the-world pauses of 5 ms every 1 s ± 250 ms", base: PS, gc: true},
	}
}

// FindZooModels returns the named zoo models, in the order named. Besides
// the names of ZooModels it accepts a base model (ps, pool, fifo) followed
// by "+wait" (the fixed dependency wait) and "+gc" (the pauses), e.g.
// "pool+wait+gc".
func FindZooModels(names []string) ([]ZooModel, error) {
	var out []ZooModel
	for _, n := range names {
		m, ok := zooModel(n)
		if !ok {
			return nil, fmt.Errorf("sim: unknown zoo model %q (ps, pool, fifo, fixed-wait, gc, or base+wait+gc)", n)
		}
		out = append(out, m)
	}
	return out, nil
}

func zooModel(name string) (ZooModel, bool) {
	for _, m := range ZooModels() {
		if m.Name == name {
			return m, true
		}
	}
	parts := strings.Split(name, "+")
	m := ZooModel{Name: name}
	switch parts[0] {
	case "ps":
		m.base = PS
	case "pool":
		m.base = Pool
	case "fifo":
		m.base = FIFO
	default:
		return ZooModel{}, false
	}
	for _, p := range parts[1:] {
		switch {
		case p == "wait" && !m.wait:
			m.wait = true
		case p == "gc" && !m.gc:
			m.gc = true
		default:
			return ZooModel{}, false
		}
	}
	m.Description = m.base.String()
	if m.wait {
		m.Description += ", a fixed dependency wait of 20× the mean CPU time"
	}
	if m.gc {
		m.Description += ", GC pauses of 5 ms every 1 s ± 250 ms"
	}
	return m, true
}

// ZooDist is a family of service-time distributions of the zoo, given a
// mean by New.
type ZooDist struct {
	Name        string                        // "exp", "lognormal" or "bimodal"
	Description string                        // the family in a few words
	New         func(mean time.Duration) Dist // the distribution with this mean
}

// ZooDists returns the zoo's service-time distributions: exponential,
// lognormal with σ = 1, and bimodal (90% short, 10% ten times as long).
func ZooDists() []ZooDist {
	return []ZooDist{
		{Name: "exp", Description: "exponential", New: Exp},
		{Name: "lognormal", Description: "lognormal, σ = 1", New: func(m time.Duration) Dist { return LogNormal(m, 1) }},
		{Name: "bimodal", Description: "90% short, 10% 10× as long", New: func(m time.Duration) Dist {
			short := time.Duration(float64(m) / 1.9) // 0.9·s + 0.1·10s = 1.9·s
			return TwoPoint(short, 10*short, 0.1)
		}},
	}
}

// FindZooDists returns the named distributions, in the order named.
func FindZooDists(names []string) ([]ZooDist, error) {
	return findByName(ZooDists(), names, func(x ZooDist) string { return x.Name }, "distribution")
}

// Server returns the zoo server of model m with the given cores and
// distribution: a mean CPU time of cores × 1 ms (so that its capacity is
// ZooCapacity; with GC a little less), contention κ = 0.0002, free
// rejections, no memory cap.
func (m ZooModel) Server(cores int, d ZooDist) Server {
	mean := time.Duration(float64(time.Second) * float64(cores) / ZooCapacity)
	srv := Server{Model: m.base, Cores: cores, Service: d.New(mean), Contention: 0.0002}
	if m.wait {
		srv.Wait = Const(20 * srv.Service.MeanValue())
	}
	if m.gc {
		srv.GC = &GC{Every: time.Second, Jitter: 250 * time.Millisecond, Pause: 5 * time.Millisecond}
	}
	return srv
}

// Incidents returns the incident scenarios, as data, on server srv, with
// the absolute targets of each (a matrix run relaxes them to what the best
// fixed limit reaches; see RunMatrix). Loads are multiples of srv's
// capacity. Every target on the floor estimate, floor_error ≤ 0.3, is met
// by a policy without one.
//
//   - cold-2x, cold-5x: the process starts into 2× (5×) overload, with no
//     warm-up at low load, for 20 s;
//   - steady-2x, steady-5x: 10 s at 0.5×, then 2× (5×) for 20 s;
//   - halve-cores, halve-service: at 0.8×, capacity halves at 10 s for
//     20 s, by the cores (the floor stays; on one core, though, a request
//     alone gets half a core, and the floor doubles) or by the service
//     time (the floor doubles), then comes back for 15 s;
//   - ramp-3x: 5 s at 0.5×, a ramp to 3× over 25 s, 10 s at 3×;
//   - no-harm-0.7, no-harm-0.95: 25 s at 0.7× (0.95×), the first 5 s a
//     warm-up;
//   - bursts: a mean of 0.7×, the rate tripled in bursts of 100 ms about
//     every second, for 35 s, the first 5 s a warm-up.
//
// The spans are as short as the targets allow, for the matrix's sake:
// every span judged lasts at least 5 s, and the floor estimate is judged
// on at least 5 s in every scenario (10 s after each change).
//
// Goodput targets are shares of the capacity of the moment from 5 s after
// the surge or change (incident_goodput_ratio), the first 5 s after a
// change apart (early_goodput_ratio); p99 targets are on the successes of
// the same spans, over the SLO.
func Incidents(srv Server) []Scenario {
	slo := 10*srv.Service.MeanValue() + srv.Wait.MeanValue()
	floor := AtMost("floor_error", 0.3)
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	surge := func(name string, cold bool, load, goodput float64) Scenario {
		sc := Scenario{
			Name: name, Server: srv, SLO: slo, Deadline: 3 * slo,
			Targets: []Target{AtLeast("incident_goodput_ratio", goodput), AtMost("incident_p99_over_slo", 1), floor},
		}
		if cold {
			sc.Description = fmt.Sprintf("the process starts into %g× overload for 20 s", load)
			sc.Duration = sec(20)
			sc.Load = []Phase{{Load: load}}
			sc.Incident = &Incident{}
			return sc
		}
		sc.Description = fmt.Sprintf("10 s at 0.5×, then %g× for 20 s", load)
		sc.Duration, sc.Warmup, sc.Change = sec(30), sec(10), sec(10)
		sc.Load = []Phase{{Load: 0.5}, {At: sec(10), Load: load}}
		sc.Incident = &Incident{At: sec(10)}
		return sc
	}
	halve := func(name, by string, ch Change) Scenario {
		s := srv
		ch.At = sec(10)
		s.Changes = []Change{ch, {At: sec(30), ServiceFactor: 1}}
		return Scenario{
			Name:        name,
			Description: "at 0.8×, capacity halves by " + by + " at 10 s for 20 s, then comes back for 15 s",
			Duration:    sec(45), Warmup: sec(5), Server: s, SLO: slo, Deadline: 3 * slo,
			Load:     []Phase{{Load: 0.8}},
			Change:   sec(10),
			Recover:  sec(30),
			Incident: &Incident{At: sec(10), Restore: sec(30)},
			Targets: []Target{
				AtLeast("early_goodput_ratio", 0.85), AtMost("early_p99_over_slo", 2),
				AtLeast("incident_goodput_ratio", 0.93), AtMost("incident_p99_over_slo", 1),
				AtMost("late_reject_ratio", 0.01), floor,
			},
		}
	}
	noHarm := func(load, refused float64) Scenario {
		return Scenario{
			Name:        fmt.Sprintf("no-harm-%g", load),
			Description: fmt.Sprintf("25 s at %g×, the first 5 s a warm-up", load),
			Duration:    sec(25), Warmup: sec(5), Server: srv, SLO: slo, Deadline: 3 * slo,
			Load:    []Phase{{Load: load}},
			Targets: []Target{AtMost("reject_ratio", refused), floor},
		}
	}
	return []Scenario{
		surge("cold-2x", true, 2, 0.95),
		surge("cold-5x", true, 5, 0.93),
		surge("steady-2x", false, 2, 0.95),
		surge("steady-5x", false, 5, 0.93),
		halve("halve-cores", "cores", Change{ServiceFactor: 1, CoreFactor: 0.5}),
		halve("halve-service", "service time", Change{ServiceFactor: 2}),
		{
			Name:        "ramp-3x",
			Description: "5 s at 0.5×, a ramp to 3× over 25 s, 10 s at 3×",
			Duration:    sec(40), Warmup: sec(5), Server: srv, SLO: slo, Deadline: 3 * slo,
			Load:     []Phase{{Load: 0.5}, {At: sec(5), Load: 0.5}, {At: sec(30), Load: 3, Ramp: true}},
			Change:   sec(30),
			Incident: &Incident{At: sec(5)},
			Targets:  []Target{AtLeast("incident_served_ratio", 0.95), AtMost("incident_p99_over_slo", 1), floor},
		},
		noHarm(0.7, 0.005),
		noHarm(0.95, 0.01),
		{
			Name:        "bursts",
			Description: "a mean of 0.7×: the rate triples in bursts of 100 ms about every second, for 35 s",
			Duration:    sec(35), Warmup: sec(5), Server: srv, SLO: slo, Deadline: 3 * slo,
			Load:    []Phase{{Load: 0.7 / 1.2}},
			Bursts:  &Bursts{Load: 3 * 0.7 / 1.2, Length: 100 * time.Millisecond, Period: time.Second},
			Targets: []Target{AtMost("loss_over_bound", BurstsMargin), AtMost("p99_over_slo", 1), floor},
		},
	}
}

// IncidentNames returns the names of the incident scenarios, in order.
func IncidentNames() []string {
	var out []string
	for _, s := range Incidents(ZooModels()[0].Server(1, ZooDists()[0])) {
		out = append(out, s.Name)
	}
	return out
}

// scaled returns sc compressed in time by f: its length, warm-up, moments
// of change and load phases, and its incident (MatrixConfig.Scale).
func (sc Scenario) scaled(f float64) Scenario {
	d := func(x time.Duration) time.Duration { return time.Duration(float64(x) * f) }
	sc.Duration, sc.Warmup, sc.Change, sc.Recover = d(sc.Duration), d(sc.Warmup), d(sc.Change), d(sc.Recover)
	sc.Load = append([]Phase(nil), sc.Load...)
	for i := range sc.Load {
		sc.Load[i].At = d(sc.Load[i].At)
	}
	sc.Server.Changes = append([]Change(nil), sc.Server.Changes...)
	for i := range sc.Server.Changes {
		sc.Server.Changes[i].At = d(sc.Server.Changes[i].At)
	}
	if in := sc.Incident; in != nil {
		sc.Incident = &Incident{At: d(in.At), Restore: d(in.Restore), Early: d(in.Early)}
		if in.Early == 0 {
			sc.Incident.Early = d(5 * time.Second)
		}
	}
	return sc
}
