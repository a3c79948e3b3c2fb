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
