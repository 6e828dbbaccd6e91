package crashpoint

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		spec    string
		target  Name
		nth     int64
		wantErr string
	}{
		{spec: ""},
		{spec: "core.create.admitted", target: CoreCreateAdmitted, nth: 1},
		{spec: "core.create.admitted@3", target: CoreCreateAdmitted, nth: 3},
		{spec: "@7", nth: 7},
		{spec: "@0", wantErr: "whole number from 1"},
		{spec: "@-2", wantErr: "whole number from 1"},
		{spec: "core.create.admitted@x", wantErr: "whole number from 1"},
		{spec: "nope", wantErr: "no such point"},
		{spec: "nope@2", wantErr: "no such point"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			p, err := Parse(tt.spec, Core()...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), EnvVar) {
					t.Fatalf("Parse(%q) = %v; want an error naming %s and saying %q", tt.spec, err, EnvVar, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.spec == "" {
				if p != nil {
					t.Fatalf("Parse(\"\") = %+v; want nil (no crashes)", p)
				}
				return
			}
			if p.target != tt.target || p.nth != tt.nth {
				t.Errorf("Parse(%q) = target %q, nth %d; want %q, %d", tt.spec, p.target, p.nth, tt.target, tt.nth)
			}
		})
	}
}

func TestHit(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		hits    []Name
		crashes int   // how many times the crash ran
		at      int64 // the hit count after the run
	}{
		{"named, first hit", "core.start.recorded", []Name{CoreCreateAdmitted, CoreStartRecorded, CoreStartLaunched}, 1, 1},
		{"named, third hit", "core.workers.launched@3", []Name{CoreWorkerLaunched, CoreWorkersNamed, CoreWorkerLaunched, CoreWorkerLaunched}, 1, 3},
		{"named, never reached", "core.stop.recorded", []Name{CoreCreateAdmitted, CoreStartRecorded}, 0, 0},
		// A backend's point (named in the backend's package) counts as any other.
		{"any name, second", "@2", []Name{CoreCreateAdmitted, "backend.member.started", CoreStartRecorded}, 1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.spec, Core()...)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			crashes := 0
			p.WithCrash(&out, func() { crashes++ })
			ctx := With(context.Background(), p)
			for _, n := range tt.hits {
				Hit(ctx, n)
			}
			if crashes != tt.crashes || p.Hits() != tt.at {
				t.Errorf("crashes %d, hits %d; want %d, %d", crashes, p.Hits(), tt.crashes, tt.at)
			}
			if (crashes > 0) != strings.HasPrefix(out.String(), Marker) {
				t.Errorf("marker line %q with %d crashes", out.String(), crashes)
			}
		})
	}
	// Without points nothing happens, and a nil *Points is safe.
	Hit(context.Background(), CoreCreateAdmitted)
	if With(context.Background(), nil) != context.Background() || (*Points)(nil).Hits() != 0 {
		t.Error("nil points changed the context or counted hits")
	}
}

// TestCrashIsSIGKILL runs a process that hits its point: it must die of
// SIGKILL right there, having said where, and run nothing after it.
func TestCrashIsSIGKILL(t *testing.T) {
	if os.Getenv("CRASHPOINT_TEST_CHILD") == "1" {
		p, err := Parse(os.Getenv(EnvVar))
		if err != nil {
			os.Exit(3)
		}
		ctx := With(context.Background(), p)
		Hit(ctx, CoreCreateAdmitted)
		Hit(ctx, CoreStartRecorded)
		os.Stdout.WriteString("after the point\n")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashIsSIGKILL$")
	cmd.Env = append(os.Environ(), "CRASHPOINT_TEST_CHILD=1", EnvVar+"="+string(CoreStartRecorded))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child: %v; want it killed", err)
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v; want SIGKILL", ee)
	}
	if want := Marker + string(CoreStartRecorded) + " (hit 1)"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q lacks %q", stderr.String(), want)
	}
	if strings.Contains(stdout.String(), "after the point") {
		t.Error("code after the crash point ran")
	}
}
