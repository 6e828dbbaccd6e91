package scheduler

import (
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
)

// pacedProvider is a backend that asks for cloud start pacing; only the
// method matters here.
type pacedProvider struct{ providers.Provider }

func (pacedProvider) StartPoll() time.Duration { return time.Second }

// TestCloudStartPoll: a cloud backend's starting cluster is polled from
// its StartPoll (1s) up to the poll interval, whatever the fast ceiling
// passed for local backends; others keep the fast cadence.
func TestCloudStartPoll(t *testing.T) {
	cases := []struct {
		elapsed, ceiling, poll, want time.Duration
	}{
		{0, 100 * time.Millisecond, 5 * time.Second, time.Second},
		{10 * time.Second, 100 * time.Millisecond, 5 * time.Second, time.Second},
		{40 * time.Second, 250 * time.Millisecond, 5 * time.Second, 2 * time.Second},
		{10 * time.Minute, 200 * time.Millisecond, 5 * time.Second, 5 * time.Second},
		{10 * time.Minute, 100 * time.Millisecond, 500 * time.Millisecond, time.Second}, // never below StartPoll
	}
	for _, c := range cases {
		core := &Core{provider: pacedProvider{}, cfg: Config{PollInterval: c.poll}}
		if got := core.startPoll(c.elapsed, c.ceiling); got != c.want {
			t.Errorf("cloud startPoll(%s, ceiling %s, poll_interval %s) = %s, want %s", c.elapsed, c.ceiling, c.poll, got, c.want)
		}
		local := &Core{provider: providers.Provider(nil), cfg: Config{PollInterval: c.poll}}
		if got, want := local.startPoll(c.elapsed, c.ceiling), startPoll(c.elapsed, c.ceiling); got != want {
			t.Errorf("local startPoll(%s, %s) = %s, want the fast %s", c.elapsed, c.ceiling, got, want)
		}
	}
	// A boot of two minutes: how many polls each cadence makes.
	count := func(core *Core) (n int) {
		for at := time.Duration(0); at < 2*time.Minute; at += core.startPoll(at, 100*time.Millisecond) {
			n++
		}
		return n
	}
	cloud, fast := count(&Core{provider: pacedProvider{}, cfg: Config{PollInterval: 5 * time.Second}}), count(&Core{cfg: Config{PollInterval: 5 * time.Second}})
	if cloud > 60 {
		t.Errorf("%d polls of a cloud cluster in a two-minute boot; want at most 60", cloud)
	}
	t.Logf("polls in a two-minute boot: cloud %d, local %d", cloud, fast)
}
