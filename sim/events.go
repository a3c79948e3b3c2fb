package sim

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Event is a moment at which a scenario changes: a load step, the start or
// the end of a ramp, a change of the server, or the moment settling time is
// measured from. Label is a few words for a figure ("load 5×"),
// Description a sentence for a report ("the offered load steps to 5×
// capacity").
type Event struct {
	At          time.Duration
	Label       string
	Description string
}

// Events returns the moments at which s changes, in time order. Changes at
// the same moment are one Event, their labels joined by ", " and their
// descriptions by "; ".
func (s Scenario) Events() []Event {
	var evs []Event
	add := func(at time.Duration, label, desc string) {
		for i := range evs {
			if evs[i].At == at {
				evs[i].Label += ", " + label
				evs[i].Description += "; " + desc
				return
			}
		}
		evs = append(evs, Event{at, label, desc})
	}
	for i := 1; i < len(s.Load); i++ {
		prev, ph := s.Load[i-1], s.Load[i]
		switch {
		case ph.Ramp && ph.Load != prev.Load:
			add(prev.At, fmt.Sprintf("ramp to %g×", ph.Load),
				fmt.Sprintf("the offered load starts ramping from %g× to %g× capacity", prev.Load, ph.Load))
			add(ph.At, fmt.Sprintf("%g× reached", ph.Load), fmt.Sprintf("the ramp reaches %g× capacity and the load holds", ph.Load))
		case !ph.Ramp && ph.Load != prev.Load:
			add(ph.At, fmt.Sprintf("load %g×", ph.Load), fmt.Sprintf("the offered load steps to %g× capacity", ph.Load))
		}
	}
	svc, wait := 1.0, 1.0
	for _, c := range s.Server.Changes {
		if c.ServiceFactor != svc {
			if c.ServiceFactor == 1 {
				add(c.At, "service ×1", "the service time is back to nominal")
			} else {
				add(c.At, fmt.Sprintf("service ×%g", c.ServiceFactor),
					fmt.Sprintf("the service time is multiplied by %g (capacity %.3g× nominal)", c.ServiceFactor, 1/c.ServiceFactor))
			}
			svc = c.ServiceFactor
		}
		wf := cmp.Or(c.WaitFactor, 1)
		if wf != wait {
			who := ""
			if len(c.WaitPriorities) > 0 {
				ps := make([]string, len(c.WaitPriorities))
				for i, p := range c.WaitPriorities {
					ps[i] = fmt.Sprint(p)
				}
				who = " of priority " + strings.Join(ps, ", ")
			}
			if wf == 1 {
				add(c.At, "wait ×1", "the dependency wait is back to nominal")
			} else {
				add(c.At, fmt.Sprintf("wait ×%.3g", wf),
					fmt.Sprintf("the dependency wait%s is multiplied by %.3g", who, wf))
			}
			wait = wf
		}
	}
	if s.Change > 0 && !slices.ContainsFunc(evs, func(e Event) bool { return e.At == s.Change }) {
		add(s.Change, "change", "settling time is measured from here")
	}
	slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
	return evs
}

// Priorities returns the distinct priorities of s's classes, most
// important (lowest) first; none for a scenario without classes.
func (s Scenario) Priorities() []int {
	var ps []int
	for _, c := range s.Classes {
		ps = append(ps, c.Priority)
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}

// Demand returns the first attempts per second s schedules for priority q
// at time t, on a server of the given capacity (requests per second): the
// load its phases schedule at t, ramps interpolated as the simulator reads
// them, times capacity, times q's share of the classes. Bursts are not
// scheduled and not counted. A scenario without classes has no demand
// per priority (0).
func (s Scenario) Demand(q int, t time.Duration, capacity float64) float64 {
	var share, total float64
	for _, c := range s.Classes {
		total += c.Share
		if c.Priority == q {
			share += c.Share
		}
	}
	if total == 0 || share == 0 || len(s.Load) == 0 {
		return 0
	}
	share /= total
	return loadAt(s.Load, int64(t)) * capacity * share
}
