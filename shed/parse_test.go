package shed

import "testing"

func TestParsePriority(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Priority
		ok   bool
	}{
		{"critical_plus", CriticalPlus, true},
		{"CRITICAL_PLUS", CriticalPlus, true},
		{"critical-plus", CriticalPlus, true},
		{"Critical", Critical, true},
		{"sheddable_plus", SheddablePlus, true},
		{"sheddable", Sheddable, true},
		{"0", CriticalPlus, true},
		{"3", Sheddable, true},
		{"4", Critical, false},
		{"", Critical, false},
		{"critical ", Critical, false},
		{"criticalplus", Critical, false},
		{string(make([]byte, 1<<16)), Critical, false},
	} {
		got, err := ParsePriority(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParsePriority(%.20q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	for p := CriticalPlus; p < Priorities; p++ {
		if got, err := ParsePriority(p.String()); err != nil || got != p {
			t.Errorf("round trip %v: %v, %v", p, got, err)
		}
	}
}

func FuzzParsePriority(f *testing.F) {
	for _, s := range []string{"critical", "SHEDDABLE_PLUS", "2", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePriority(s)
		if err != nil {
			if p != Critical {
				t.Fatalf("error with priority %v", p)
			}
			return
		}
		if p >= Priorities {
			t.Fatalf("out of range %v", p)
		}
		if again, err := ParsePriority(p.String()); err != nil || again != p {
			t.Fatalf("round trip %v", p)
		}
	})
}
