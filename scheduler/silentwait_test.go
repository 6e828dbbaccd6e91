package scheduler

import (
	"testing"
	"time"
)

// TestSilentSchedulerBacksOff plays a scheduler that stops answering
// against the waits the loop asks for, on a simulated clock: its passes
// (each a Describe) thin out from a fifth of the poll interval to the poll
// interval, the failure still comes exactly at the heartbeat timeout, and
// an answer brings the cluster back to the first cadence.
func TestSilentSchedulerBacksOff(t *testing.T) {
	cases := []struct{ poll, timeout time.Duration }{
		{5 * time.Second, 30 * time.Second}, // the defaults
		{5 * time.Second, 7 * time.Second},  // a timeout between two passes
		{50 * time.Millisecond, 30 * time.Second},
		{10 * time.Second, 3 * time.Second}, // a timeout shorter than the first wait
	}
	for _, tc := range cases {
		c := &Core{cfg: Config{PollInterval: tc.poll, HeartbeatTimeout: tc.timeout}, clusters: newClusterTable()}
		// passes[i] counts the passes in the i-th poll interval of silence.
		var passes []int
		at := time.Duration(0)
		for ; at < tc.timeout; at += c.silentWait("c", at) {
			w := int(at / tc.poll)
			for len(passes) <= w {
				passes = append(passes, 0)
			}
			passes[w]++
			if len(passes) > 1_000_000 {
				t.Fatalf("poll %s, timeout %s: no end to the passes", tc.poll, tc.timeout)
			}
		}
		if at != tc.timeout {
			t.Errorf("poll %s, timeout %s: failed after %s of silence, want exactly the timeout", tc.poll, tc.timeout, at)
		}
		for i := 1; i < len(passes); i++ {
			if passes[i] > 1 {
				t.Errorf("poll %s, timeout %s: %d passes in poll interval %d of the silence, want at most 1 once backed off (all: %v)", tc.poll, tc.timeout, passes[i], i, passes)
			}
		}
		if tc.timeout > 2*tc.poll && passes[0] <= 1 {
			t.Errorf("poll %s, timeout %s: %v passes, want more in the first interval than later", tc.poll, tc.timeout, passes)
		}
		// Well below the old cadence of one pass per fifth of the interval.
		total := 0
		for _, n := range passes {
			total += n
		}
		if old := int(tc.timeout/(tc.poll/5)) + 1; tc.timeout > 2*tc.poll && total*2 > old {
			t.Errorf("poll %s, timeout %s: %d passes, want at most half of the %d at a fixed fifth", tc.poll, tc.timeout, total, old)
		}

		// It answers: the next silence starts at the first cadence again.
		c.now = func() time.Time { return time.Unix(0, 0) }
		c.markAnswered("c")
		if got, want := c.silentWait("c", 0), min(tc.poll/5, tc.timeout); got != want {
			t.Errorf("poll %s, timeout %s: first wait after an answer %s, want %s", tc.poll, tc.timeout, got, want)
		}
	}
}
