package article_test

import (
	"fmt"

	"github.com/sluicehq/sluice/sim/article"
)

// The article's GCRA replay: each figure, the article's value and the
// target that checks its claim.
func Example() {
	scs, err := article.Find(article.Scenarios(), []string{"seed-gcra"})
	if err != nil {
		panic(err)
	}
	r, err := article.Run(scs[0], 1)
	if err != nil {
		panic(err)
	}
	for _, f := range r.Figures {
		fmt.Printf("%s: %g (article: %s, target %s, pass %v)\n", f.Metric, f.Value, f.Article, f.Target, f.Pass)
	}
	fmt.Println("every target met:", r.Pass)
	// Output:
	// burst_admitted: 11 (article: 11 of 20, target = 11, pass true)
	// at_200rps_admitted: 49 (article: 49 of 98, target = 49, pass true)
	// at_50rps_admitted: 100 (article: 99 of 100, target = 100, pass true)
	// min_spacing_ms: 10 (article: ≥ 10, target ≥ 10, pass true)
	// every target met: true
}

// RunSeeds replays scenarios for several seeds; only seed-sliding-window
// draws its arrivals from the seed.
func ExampleRunSeeds() {
	scs, err := article.Find(article.Scenarios(), []string{"seed-token-bucket", "seed-sliding-window"})
	if err != nil {
		panic(err)
	}
	out, errs := article.RunSeeds(scs, 1, 3)
	if len(errs) > 0 {
		panic(errs[0])
	}
	for i, rs := range out {
		for _, r := range rs {
			fmt.Printf("%s seed %d: %s = %.4g, pass %v\n", scs[i].Name, r.Seed, r.Figures[0].Metric, r.Figures[0].Value, r.Pass)
		}
	}
	// Output:
	// seed-token-bucket seed 1: first_burst_admitted = 500, pass true
	// seed-token-bucket seed 2: first_burst_admitted = 500, pass true
	// seed-token-bucket seed 3: first_burst_admitted = 500, pass true
	// seed-sliding-window seed 1: mean_abs_error = 1.397, pass true
	// seed-sliding-window seed 2: mean_abs_error = 0.8147, pass true
	// seed-sliding-window seed 3: mean_abs_error = 1.487, pass true
}
