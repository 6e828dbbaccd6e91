package baseinfo

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/daemon"

	"github.com/gatewayhq/gateway/internal/testdocker"
)

// What the image's own python says about itself, for comparing with what
// Inspect read from the layers.
const selfReport = `
import json, os, platform, re, sys, sysconfig
import importlib.metadata as md
pkgs, where = {}, {}
for d in md.distributions():
    key = re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower()
    if key not in pkgs:
        pkgs[key] = d.version
        where[key] = str(d._path)
p = sysconfig.get_paths()
print(json.dumps({
    "version": "%d.%d" % sys.version_info[:2],
    "executable": os.path.realpath(sys.executable),
    "purelib": p["purelib"], "platlib": p["platlib"], "scripts": p["scripts"],
    "data": p["data"], "include": p["include"],
    "glibc": platform.libc_ver()[1],
    "packages": pkgs, "where": where,
}))
`

type selfInfo struct {
	Version, Executable, Purelib, Platlib, Scripts, Data, Include, Glibc string
	Packages, Where                                                      map[string]string
}

// TestDebianTestImage reads the real Debian image from the local engine
// (docker save, through go-containerregistry's daemon package) and checks
// the result against fixed expectations and against what the image's own
// python reports when run.
func TestDebianTestImage(t *testing.T) {
	ref := testdocker.DaskImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := daemon.Image(r, daemon.WithContext(ctx), daemon.WithFileBufferedOpener())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	info, f, err := inspect(ctx, img, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d packages, site directories %v; %d layer streams, %d bytes of contents read, %d entries, in %v (with docker save)",
		ref, len(info.Packages), info.SysPath, f.opened, f.read, f.entries, time.Since(start))
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]

	for _, c := range []struct{ what, got, want string }{
		{"Python", info.Python, "3.11"},
		{"Interpreter", info.Interpreter, "/usr/bin/python3.11"},
		{"Prefix", info.Prefix, "/usr/local"},
		{"SitePackages", info.SitePackages, "/usr/local/lib/python3.11/dist-packages"},
		{"Scripts", info.Scripts, "/usr/local/bin"},
		{"Headers", info.Headers, "/usr/include/python3.11"},
		{"Glibc", info.Glibc, "2.36"},
		{"Arch", info.Arch, arch},
		{"Conda", info.Conda, ""},
		{"Venv", info.Venv, ""},
		// Debian's versions, as importlib.metadata reports them
		// (dpkg: python3-distributed 2022.12.1+ds1-3).
		{"distributed", info.Packages["distributed"], "2022.12.1+ds.1"},
		{"dask", info.Packages["dask"], "2022.12.1+dfsg"},
		{"pip", info.Packages["pip"], "23.0.1"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	if !info.ExternallyManaged {
		t.Error("ExternallyManaged = false; bookworm's python has EXTERNALLY-MANAGED")
	}

	self := runSelfReport(t, ctx, ref)
	for _, c := range []struct{ what, got, want string }{
		{"Python", info.Python, self.Version},
		{"Interpreter", info.Interpreter, self.Executable},
		{"SitePackages (purelib)", info.SitePackages, self.Purelib},
		{"SitePackages (platlib)", info.SitePackages, self.Platlib},
		{"Scripts", info.Scripts, self.Scripts},
		{"Prefix (data)", info.Prefix, self.Data},
		{"Headers (include)", info.Headers, self.Include},
		{"Glibc", info.Glibc, self.Glibc},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, the image's python says %q", c.what, c.got, c.want)
		}
	}
	if !reflect.DeepEqual(info.Packages, self.Packages) {
		t.Errorf("packages differ from importlib.metadata's in the image:\nread %v\nran  %v", info.Packages, self.Packages)
	}
	if !reflect.DeepEqual(info.DistInfo, self.Where) {
		t.Errorf("metadata paths differ from importlib.metadata's in the image:\nread %v\nran  %v", info.DistInfo, self.Where)
	}
}

func runSelfReport(t *testing.T, ctx context.Context, ref string) selfInfo {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	created, err := cli.ContainerCreate(ctx, &container.Config{Image: ref, Entrypoint: []string{"python3", "-c", selfReport}},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
	}()
	waitC, errC := cli.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-waitC:
		if res.StatusCode != 0 {
			t.Errorf("python in the image exited %d", res.StatusCode)
		}
	case err := <-errC:
		t.Fatal(err)
	}
	rc, err := cli.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out, errOut bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errOut, rc); err != nil {
		t.Fatal(err)
	}
	var self selfInfo
	if err := json.Unmarshal(out.Bytes(), &self); err != nil {
		t.Fatalf("the image's python said %q (stderr %q): %v", out.String(), errOut.String(), err)
	}
	return self
}
