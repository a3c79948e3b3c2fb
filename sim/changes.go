package sim

import (
	"fmt"
	"slices"
)

// serverState is the part of the server that Scenario.Server.Changes move:
// the factors on CPU work and on the cores and, per priority, on the
// dependency wait. Run and RunRealtime share it.
type serverState struct {
	svcFactor  float64
	coreFactor float64
	waitFactor [MaxPriorities]float64
	changeIdx  int // the next change to apply
}

func newServerState() serverState {
	st := serverState{svcFactor: 1, coreFactor: 1}
	for i := range st.waitFactor {
		st.waitFactor[i] = 1
	}
	return st
}

// apply applies every change of cs due by time t.
func (st *serverState) apply(cs []Change, t int64) {
	for st.changeIdx < len(cs) && int64(cs[st.changeIdx].At) <= t {
		c := cs[st.changeIdx]
		st.svcFactor = c.ServiceFactor
		st.coreFactor = c.CoreFactor
		if st.coreFactor == 0 {
			st.coreFactor = 1
		}
		wf := c.WaitFactor
		if wf == 0 {
			wf = 1
		}
		for p := range st.waitFactor {
			if len(c.WaitPriorities) == 0 || slices.Contains(c.WaitPriorities, p) {
				st.waitFactor[p] = wf
			}
		}
		st.changeIdx++
	}
}

// findByName returns the items of all with the given names, in the order
// named; what names the kind of item in the error for an unknown name.
func findByName[T any](all []T, names []string, name func(T) string, what string) ([]T, error) {
	var out []T
	for _, n := range names {
		found := false
		for _, x := range all {
			if name(x) == n {
				out = append(out, x)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("sim: unknown %s %q", what, n)
		}
	}
	return out, nil
}
