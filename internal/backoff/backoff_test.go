package backoff

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
)

func TestWindow(t *testing.T) {
	for _, tt := range []struct {
		attempt   int
		base, max time.Duration
		want      time.Duration
	}{
		{1, 100 * time.Millisecond, 10 * time.Second, 100 * time.Millisecond},
		{2, 100 * time.Millisecond, 10 * time.Second, 200 * time.Millisecond},
		{4, 100 * time.Millisecond, 10 * time.Second, 800 * time.Millisecond},
		{8, 100 * time.Millisecond, 10 * time.Second, 10 * time.Second}, // capped
		{60, time.Second, time.Minute, time.Minute},                     // no overflow
		{1, 0, time.Second, time.Second},                                // no base: the cap
	} {
		if got := Window(tt.attempt, tt.base, tt.max); got != tt.want {
			t.Errorf("Window(%d, %s, %s) = %s, want %s", tt.attempt, tt.base, tt.max, got, tt.want)
		}
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("Sleep: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	testutil.Returns(t, "an hour's Sleep on a cancelled context", func() {
		if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
			t.Errorf("Sleep on a cancelled context = %v", err)
		}
	})
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep(0) on a cancelled context = %v", err)
	}
}
