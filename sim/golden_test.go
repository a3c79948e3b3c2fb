package sim

import (
	"fmt"
	"hash/fnv"
	"testing"
)

// TestProcessorSharingGolden pins a few figures of the processor-sharing
// model, to the bit, on shortened built-in scenarios: adding server models
// must not move a single number of the existing ones.
func TestProcessorSharingGolden(t *testing.T) {
	tests := []struct {
		scenario, policy string
		f                float64
		want             string
	}{
		{"step-2x", "gradient", 0.2, goldenStep2x},
		{"capacity-drop", "vegas", 0.2, goldenCapacityDrop},
		{"bursts", "static", 0.3, goldenBursts},
		{"dependency-spike", "aimd", 0.2, goldenDependency},
		{"priorities-retries", "none", 0.1, goldenPriorities},
	}
	for _, tt := range tests {
		r, err := Run(short(scenario(t, tt.scenario), tt.f), policy(t, tt.policy), 3)
		if err != nil {
			t.Fatal(err)
		}
		if got := goldenFigures(r); got != tt.want {
			t.Errorf("%s/%s:\n got %s\nwant %s", tt.scenario, tt.policy, got, tt.want)
		}
	}
}

// goldenFigures prints the headline figures at full precision and a digest
// of the time series.
func goldenFigures(r *Result) string {
	h := fnv.New64a()
	for _, p := range r.Series {
		fmt.Fprint(h, p.T, p.Offered, p.Goodput, p.Rejected, p.P99, p.Limit, p.InFlight, p.Completed, p.OverSLO)
	}
	return fmt.Sprintf("goodput=%v p99=%v mean=%v rejected=%v phase=%v cov=%v wasted=%v requests=%d series=%x",
		r.GoodputRatio, r.P99ms, r.MeanMs, r.RejectRatio, r.PhaseGoodput, r.LimitCoV, r.WastedRatio, r.Requests, h.Sum64())
}

// The figures of the processor-sharing model before the server zoo, seed 3.
const (
	goldenStep2x       = "goodput=0.8227430555555556 p99=29.938605 mean=6.33020825897809 rejected=0.45254008380371924 phase=0.9838020833333333 cov=0.07428210414465695 wasted=0.015316920536404809 requests=89859 series=8fd52707b7a61aa1"
	goldenCapacityDrop = "goodput=0.5380902777777777 p99=42.726148 mean=8.067898568736355 rejected=0.32797670405522 phase=0.408203125 cov=0.07824977941382072 wasted=0.007808649799414175 requests=51516 series=187caf994132719d"
	goldenBursts       = "goodput=0.6329166666666667 p99=41.542218 mean=6.76783742576014 rejected=0.11046652750133501 phase=0 cov=0 wasted=0.0030790213418963827 requests=47507 series=8cf889f4306e2d6e"
	goldenDependency   = "goodput=0.05919791666666666 p99=200.846515 mean=14.437399817999541 rejected=0.9132373215897481 phase=0.03175 cov=1.1869811971111854 wasted=0.1694468194017771 requests=224181 series=a5c7feb425ec11f8"
	goldenPriorities   = "goodput=0.07927083333333333 p99=7211.677923 mean=1864.9961326310042 rejected=0 phase=0.03640625 cov=0 wasted=0.7692374833686533 requests=25818 series=6e179920c6f01ed6"
)
