package sim

import (
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/sim/article"
)

// The deprecated seed-scenario names are the article package's.
func TestDeprecatedSeedScenarios(t *testing.T) {
	scs := SeedScenarios()
	if got, want := len(scs), len(article.Scenarios()); got != want || got == 0 {
		t.Fatalf("%d seed scenarios, article has %d", got, want)
	}
	found, err := FindSeedScenarios(scs, []string{"seed-gcra"})
	if err != nil || len(found) != 1 || !IsSeedScenario(found[0].Name) || IsSeedScenario("step-2x") {
		t.Fatalf("FindSeedScenarios: %v, %v", found, err)
	}
	got, err := RunSeed(found[0], 3)
	if err != nil {
		t.Fatal(err)
	}
	want, err := article.Run(found[0], 3)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || !got.Pass {
		t.Errorf("RunSeed gave %+v, article.Run %+v", got, want)
	}
	if _, err := FindSeedScenarios(scs, []string{"seed-bogus"}); err == nil {
		t.Error("an unknown name found")
	}
}
