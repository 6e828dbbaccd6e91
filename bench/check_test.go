package bench

import (
	"math"
	"testing"
	"time"
)

func TestParseWindowAndThreshold(t *testing.T) {
	for in, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "2w": 14 * 24 * time.Hour, "36h": 36 * time.Hour, "1.5d": 36 * time.Hour} {
		if got, err := ParseWindow(in); err != nil || got != want {
			t.Errorf("ParseWindow(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "-1d", "0h", "7 days", "1e9d"} {
		if _, err := ParseWindow(in); err == nil {
			t.Errorf("ParseWindow(%q) accepted", in)
		}
	}
	for in, want := range map[string]float64{"10%": 0.1, "0.25": 0.25, " 5% ": 0.05} {
		if got, err := ParseThreshold(in); err != nil || math.Abs(got-want) > 1e-12 {
			t.Errorf("ParseThreshold(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "%", "0%", "-10%", "ten", "NaN"} {
		if _, err := ParseThreshold(in); err == nil {
			t.Errorf("ParseThreshold(%q) accepted", in)
		}
	}
}
