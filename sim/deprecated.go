package sim

// The rate-limiting article's replays moved to package sim/article; these
// names are kept for one release.

import "github.com/sluicehq/sluice/sim/article"

// SeedScenario is one of the rate-limiting article's simulations, replayed
// against the real ratelimit code.
//
// Deprecated: use article.Scenario.
type SeedScenario = article.Scenario

// SeedFigure is one measured figure of a seed scenario.
//
// Deprecated: use article.Figure.
type SeedFigure = article.Figure

// SeedResult is what one run of a seed scenario measured.
//
// Deprecated: use article.Result.
type SeedResult = article.Result

// IsSeedScenario reports whether name is a seed scenario's name (seed-…).
//
// Deprecated: use article.IsScenario.
func IsSeedScenario(name string) bool { return article.IsScenario(name) }

// FindSeedScenarios returns the named seed scenarios from all, in the order
// named.
//
// Deprecated: use article.Find.
func FindSeedScenarios(all []SeedScenario, names []string) ([]SeedScenario, error) {
	return article.Find(all, names)
}

// RunSeed runs seed scenario sc with the given seed and judges its targets.
//
// Deprecated: use article.Run.
func RunSeed(sc SeedScenario, seed uint64) (*SeedResult, error) { return article.Run(sc, seed) }

// SeedScenarios returns the four simulations of the rate-limiting article.
//
// Deprecated: use article.Scenarios.
func SeedScenarios() []SeedScenario { return article.Scenarios() }
