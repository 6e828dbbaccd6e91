package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// fakeResolver knows some images' contents; the real resolver (the
// gateway's environment service) has its own tests.
type fakeResolver struct {
	images map[string]images.Spec
}

func (f fakeResolver) Resolve(_ context.Context, _ scheduler.Who, image, env string) (string, images.Spec, bool, error) {
	if env != "" {
		return "", images.Spec{}, false, fmt.Errorf("%w: no environment %q", scheduler.ErrInvalid, env)
	}
	spec, ok := f.images[image]
	return image, spec, ok, nil
}

// mismatchReport is what the member launcher prints when its versions
// differ from the client's.
const mismatchReport = images.MismatchMarker + ": this worker does not run the client's software\n" +
	"package  client  image\nnumpy    1.99.0  1.24.2\n"

func softwareHarness(t *testing.T) *harness {
	imageSpec := images.Spec{Python: "3.11", Platform: "linux/amd64", Packages: []images.Package{{Name: "dask", Version: "2024.8.0"}, {Name: "numpy", Version: "1.24.2"}}}
	return newHarness(t, func(c *scheduler.Config) {
		c.Limits.Images = true
		c.Envs = fakeResolver{images: map[string]images.Spec{"reg/team:1": imageSpec}}
	})
}

func TestCreateChecksTheImagesSoftware(t *testing.T) {
	client := map[string]string{"python": "3.11", "dask": "2024.8.0", "numpy": "1.99.0"}
	cases := []struct {
		name   string
		opts   map[string]any
		err    error
		msg    []string
		expect string // a part of the spec's EnvExpect, "" for none
	}{
		{name: "a mismatch is refused with the table", opts: map[string]any{"image": "reg/team:1", "client_env": client},
			err: scheduler.ErrEnvMismatch, msg: []string{"reg/team:1 has other versions than your Python", "--allow-mismatch", "numpy    1.99.0  1.24.2"}},
		{name: "allowed, the members check nothing", opts: map[string]any{"image": "reg/team:1", "client_env": client, "allow_mismatch": true}},
		{name: "matching versions, the members check them", opts: map[string]any{"image": "reg/team:1", "client_env": map[string]string{"python": "3.11.4", "numpy": "1.24.2"}},
			expect: `{"numpy":"1.24.2","python":"3.11"}`}, // in the check's normal form
		{name: "an image of unknown contents is checked by its members", opts: map[string]any{"image": "reg/other:1", "client_env": client},
			expect: `"numpy":"1.99.0"`},
		{name: "an unknown environment", opts: map[string]any{"env": "nope"}, err: scheduler.ErrInvalid, msg: []string{`no environment "nope"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := softwareHarness(t)
			h.start()
			cl, err := h.core.Create(h.ctx, who("alice"), rawOptions(t, tc.opts))
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Create: %v, want %v", err, tc.err)
				}
				for _, m := range tc.msg {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error lacks %q:\n%v", m, err)
					}
				}
				if cs, _ := h.core.List(h.ctx, "alice", nil); len(cs) != 0 {
					t.Errorf("a refused cluster was recorded: %v", cs)
				}
				return
			}
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			h.waitLaunched(cl.Name)
			spec := h.fp.spec(cl.Name)
			if spec.Image != tc.opts["image"] {
				t.Errorf("the scheduler runs %q, want %q", spec.Image, tc.opts["image"])
			}
			if tc.expect == "" && spec.EnvExpect != "" || !strings.Contains(spec.EnvExpect, tc.expect) {
				t.Errorf("EnvExpect %q, want it to hold %q", spec.EnvExpect, tc.expect)
			}
		})
	}
}

func TestEnvWithoutAResolver(t *testing.T) {
	h := newHarness(t, func(c *scheduler.Config) { c.Limits.Images = true })
	_, err := h.core.Create(h.ctx, who("alice"), rawOptions(t, map[string]any{"env": "team"}))
	if !errors.Is(err, scheduler.ErrInvalid) || !strings.Contains(err.Error(), "give an image instead of env") {
		t.Errorf("env without a resolver: %v", err)
	}
}

func TestMembersThatRunOtherSoftwareFailTheCluster(t *testing.T) {
	opts := map[string]any{"image": "reg/team:1", "client_env": map[string]string{"numpy": "1.24.2"}, "workers": 2}
	t.Run("a worker", func(t *testing.T) {
		h := softwareHarness(t)
		h.start()
		cl, err := h.core.Create(h.ctx, who("alice"), rawOptions(t, opts))
		if err != nil {
			t.Fatal(err)
		}
		h.waitSettled(cl.Name, 2)
		victim := h.fp.runningWorkers(cl.Name)[0]
		h.fp.exitWorker(cl.Name, victim, "exit status 97\n"+mismatchReport)
		got := h.waitStatus(cl.Name, store.Failed)
		if !strings.Contains(got.Reason, victim+" runs other software than the client") || !strings.Contains(got.Reason, "numpy    1.99.0  1.24.2") {
			t.Errorf("reason %q", got.Reason)
		}
		_, launched := h.fp.launches(cl.Name)
		if len(launched) != 2 {
			t.Errorf("workers launched %v: a worker on the wrong software was replaced", launched)
		}
		h.checkDown(cl.Name)
	})
	t.Run("the scheduler", func(t *testing.T) {
		h := softwareHarness(t)
		h.fp.configure(func(f *fakeProvider) { f.crashOnStart = mismatchReport })
		h.start()
		cl, err := h.core.Create(h.ctx, who("alice"), rawOptions(t, opts))
		if err != nil {
			t.Fatal(err)
		}
		got := h.waitStatus(cl.Name, store.Failed)
		if !strings.Contains(got.Reason, "the scheduler runs other software than the client:\n"+images.MismatchMarker) || !strings.Contains(got.Reason, "numpy") {
			t.Errorf("reason %q", got.Reason)
		}
		h.checkDown(cl.Name)
	})
}
