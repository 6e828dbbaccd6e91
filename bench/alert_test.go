package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const secretPath = "/hooks/T0KEN-s3cret-value"

func TestWebhookPost(t *testing.T) {
	tests := []struct {
		name      string
		answers   []int // status per attempt; the last repeats
		wantErr   bool
		wantCalls int
	}{
		{"delivered at once", []int{200}, false, 1},
		{"5xx then delivered", []int{503, 500, 204}, false, 3},
		{"429 is retried", []int{429, 200}, false, 2},
		{"4xx is final", []int{400}, true, 1},
		{"gives up after the attempts", []int{502}, true, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var bodies []Alert
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				if r.URL.Path != secretPath || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
					t.Errorf("request %s %s %q", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
				}
				var a Alert
				if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
					t.Errorf("body: %v", err)
				}
				bodies = append(bodies, a)
				st := tc.answers[min(len(bodies), len(tc.answers))-1]
				w.WriteHeader(st)
			}))
			defer srv.Close()
			var logs bytes.Buffer
			var waits []time.Duration
			w := &Webhook{URL: srv.URL + secretPath, Attempts: 4, Backoff: time.Second,
				Log:   slog.New(slog.NewTextHandler(&logs, nil)),
				Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
			alert := Alert{Kind: "bench_regression", Suite: "s", Run: "br-1", Regressions: []Regression{{Test: "bench_a.py::bench_x", Env: "team", Change: 0.5, P: 0.01}}}
			err := w.Post(context.Background(), alert)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Post: %v, want error %v", err, tc.wantErr)
			}
			if len(bodies) != tc.wantCalls {
				t.Fatalf("%d calls, want %d", len(bodies), tc.wantCalls)
			}
			if bodies[0].Regressions[0].Test != "bench_a.py::bench_x" || bodies[0].Run != "br-1" {
				t.Errorf("received %+v", bodies[0])
			}
			for i, d := range waits {
				if want := time.Second << i; d != want {
					t.Errorf("wait %d is %s, want %s (exponential backoff)", i, d, want)
				}
			}
			for _, s := range []string{logs.String(), errString(err)} {
				if strings.Contains(s, "s3cret") {
					t.Errorf("the webhook's secret leaked: %s", s)
				}
			}
			if !strings.Contains(logs.String(), "127.0.0.1") {
				t.Errorf("logs do not name the host:\n%s", logs.String())
			}
		})
	}
}

// A webhook that cannot be reached: the error says why, without the URL.
func TestWebhookUnreachableKeepsSecret(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var logs bytes.Buffer
	w := &Webhook{URL: "http://" + addr + secretPath, Attempts: 2, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Sleep: func(context.Context, time.Duration) error { return nil }}
	err = w.Post(context.Background(), Alert{Kind: "bench_regression"})
	if !errors.Is(err, ErrWebhook) {
		t.Fatalf("Post: %v, want ErrWebhook", err)
	}
	if !strings.Contains(err.Error(), "refused") {
		t.Errorf("error does not say why: %v", err)
	}
	for _, s := range []string{logs.String(), err.Error()} {
		if strings.Contains(s, "s3cret") || strings.Contains(s, "hooks") {
			t.Errorf("the webhook's URL leaked: %s", s)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
