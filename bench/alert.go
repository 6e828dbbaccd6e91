package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"
)

// Regression is one test a check flagged.
type Regression struct {
	Test           string  `json:"test"`
	Env            string  `json:"env"`
	Run            string  `json:"run"`
	BaselineMedian float64 `json:"baseline_median_seconds"`
	LatestMedian   float64 `json:"latest_median_seconds"`
	Change         float64 `json:"change"` // relative: 0.25 is 25 % slower
	P              float64 `json:"p_value"`
	Reason         string  `json:"reason,omitempty"`
}

// Alert is what the gateway POSTs to bench.alert_webhook.
type Alert struct {
	Kind        string       `json:"kind"` // "bench_regression"
	Text        string       `json:"text"` // one line for chat webhooks
	Schedule    string       `json:"schedule"`
	Suite       string       `json:"suite"`
	Owner       string       `json:"owner"`
	Run         string       `json:"run"`
	Window      string       `json:"window"`
	Threshold   float64      `json:"threshold"`
	Regressions []Regression `json:"regressions"`
	At          time.Time    `json:"at"`
}

// Webhook posts alerts with retries. The URL is treated as a secret (such
// URLs often carry a token): logs and errors name its host only.
type Webhook struct {
	URL      string
	Client   *http.Client // nil: a client with a 10 s timeout
	Attempts int          // 0: 5
	Backoff  time.Duration
	Log      *slog.Logger
	// Sleep waits between attempts; tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
}

// ErrWebhook is an alert that could not be delivered.
var ErrWebhook = errors.New("alert webhook")

// Post sends the alert, retrying network errors, 429 and 5xx answers
// with exponential backoff; other answers are final.
func (w *Webhook) Post(ctx context.Context, a Alert) error {
	u, err := url.Parse(w.URL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%w: bench.alert_webhook is not a URL", ErrWebhook)
	}
	host := u.Hostname()
	body, err := json.Marshal(a)
	if err != nil {
		return err
	}
	hc := w.Client
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	attempts := w.Attempts
	if attempts <= 0 {
		attempts = 5
	}
	backoff := w.Backoff
	if backoff <= 0 {
		backoff = time.Second
	}
	sleep := w.Sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	log := w.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var last string
	for i := 1; i <= attempts; i++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("%w to %s: %s", ErrWebhook, host, scrub(err))
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "gateway-bench-alert")
		resp, err := hc.Do(req)
		retry := true
		if err != nil {
			last = scrub(err)
		} else {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				log.Info("bench alert delivered", "host", host, "attempt", i, "regressions", len(a.Regressions))
				return nil
			}
			last = resp.Status
			retry = resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
		}
		log.Warn("bench alert not delivered", "host", host, "attempt", i, "of", attempts, "reason", last)
		if !retry || i == attempts || ctx.Err() != nil {
			break
		}
		if err := sleep(ctx, backoff<<(i-1)); err != nil {
			break
		}
	}
	return fmt.Errorf("%w to %s: %s", ErrWebhook, host, last)
}

// scrub drops the URL from an http.Client error: only what went wrong.
func scrub(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
