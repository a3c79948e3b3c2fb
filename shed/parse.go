package shed

import (
	"fmt"
	"strings"
)

// maxPriorityText bounds the text ParsePriority looks at, so a hostile
// header cannot make it do more than a few comparisons.
const maxPriorityText = 32

// ParsePriority reads a priority as written by Priority.String
// ("critical_plus", "critical", "sheddable_plus", "sheddable"), in any
// case, with "-" accepted for "_" and the SRE book's upper-case names
// ("CRITICAL_PLUS", ...), or as its number ("0" to "3"). It is what the
// interceptors use to read a priority propagated in a header or in gRPC
// metadata. Anything else is an error; the caller decides the default.
func ParsePriority(s string) (Priority, error) {
	if len(s) == 0 || len(s) > maxPriorityText {
		return Critical, fmt.Errorf("sluice/shed: priority %.32q: want one of critical_plus, critical, sheddable_plus, sheddable or 0-3", s)
	}
	if len(s) == 1 && s[0] >= '0' && s[0] < '0'+byte(Priorities) {
		return Priority(s[0] - '0'), nil
	}
	for p, name := range priorityNames {
		if len(s) == len(name) && strings.EqualFold(strings.ReplaceAll(s, "-", "_"), name) {
			return Priority(p), nil
		}
	}
	return Critical, fmt.Errorf("sluice/shed: priority %.32q: want one of critical_plus, critical, sheddable_plus, sheddable or 0-3", s)
}
