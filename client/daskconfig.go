package client

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"
)

// The dask configuration that makes dask_gateway.Gateway() work with no
// arguments: dask reads every *.yaml, *.yml and *.json file of
// ~/.config/dask (or of $DASK_CONFIG), after /etc/dask, and the
// environment's DASK_GATEWAY__* variables over them all; dask_gateway
// takes gateway.address, gateway.proxy-address and gateway.auth.type and
// gateway.auth.kwargs from it. The file holds an API token made for it
// alone: it is written with mode 0600 in a directory of mode 0700.

// DaskConfig is what the file says.
type DaskConfig struct {
	Gateway string // the gateway's URL (http[s]://host:port)
	User    string // Basic auth's user name (dask_gateway sends it; the gateway goes by the token)
	Token   string // the API token, the Basic password
	TokenID string // its id, to revoke it
}

// daskConfigFile is the file's name in the dask configuration directory.
const daskConfigFile = "gateway.yaml"

// markerRE finds the first line of a file this package wrote, with the
// gateway and the token it holds.
var markerRE = regexp.MustCompile(`(?m)^# gateway-managed: (\S+) token (\S+)$`)

// DaskConfigPath is the dask configuration directory (as dask finds it:
// $DASK_CONFIG, else ~/.config/dask) and the file this package writes.
func DaskConfigPath() (dir, file string, err error) {
	dir = os.Getenv("DASK_CONFIG")
	if dir == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", "", fmt.Errorf("cannot find the home directory for the dask configuration: %w", err)
		}
		dir = filepath.Join(h, ".config", "dask")
	}
	return dir, filepath.Join(dir, daskConfigFile), nil
}

// ProxyAddress is where dask_gateway opens its Dask (TLS) connections:
// the gateway's own port, which routes them by TLS server name.
func ProxyAddress(gateway string) (string, error) {
	u, err := url.Parse(gateway)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("gateway URL %q has no host", gateway)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	return "tls://" + net.JoinHostPort(u.Hostname(), port), nil
}

// Render is the file's text.
func (c DaskConfig) Render() ([]byte, error) {
	proxy, err := ProxyAddress(c.Gateway)
	if err != nil {
		return nil, err
	}
	doc := map[string]any{"gateway": c.section(proxy)}
	body, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# gateway-managed: %s token %s\n", c.Gateway, c.TokenID)
	fmt.Fprintf(&b, "# Written by `gateway login` so that dask_gateway.Gateway() reaches this gateway with no\n")
	fmt.Fprintf(&b, "# arguments. It holds an API token made for it (id %s): keep this file private (mode 0600);\n", c.TokenID)
	fmt.Fprintf(&b, "# `gateway login` replaces it, `gateway logout` revokes it (or: gateway token revoke %s).\n", c.TokenID)
	b.Write(body)
	return b.Bytes(), nil
}

func (c DaskConfig) section(proxy string) map[string]any {
	return map[string]any{
		"address":       c.Gateway,
		"proxy-address": proxy,
		"auth":          map[string]any{"type": "basic", "kwargs": map[string]any{"username": c.User, "password": c.Token}},
	}
}

// DaskFileState is what a dask configuration file is to this package.
type DaskFileState int

const (
	DaskFileAbsent   DaskFileState = iota // no file
	DaskFileTemplate                      // comments only: dask_gateway's commented copy of its defaults, or empty
	DaskFileOurs                          // written (or merged) by this package
	DaskFileForeign                       // the user's own settings
)

// ReadDaskConfig says what the file at path is and, when ours, which
// gateway and token it holds.
func ReadDaskConfig(path string) (DaskFileState, DaskConfig, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return DaskFileAbsent, DaskConfig{}, nil
	}
	if err != nil {
		return 0, DaskConfig{}, fmt.Errorf("read %s: %w", path, err)
	}
	if m := markerRE.FindSubmatch(b); m != nil {
		return DaskFileOurs, DaskConfig{Gateway: string(m[1]), TokenID: string(m[2])}, nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			return DaskFileForeign, DaskConfig{}, nil
		}
	}
	return DaskFileTemplate, DaskConfig{}, nil
}

// ErrForeignDaskConfig: the dask configuration file has settings of the
// user's own, which are not replaced without their word (merge).
var ErrForeignDaskConfig = errors.New("the dask configuration file has settings of your own")

// WriteDaskConfig writes c to path, in a directory of mode 0700 and a file
// of mode 0600, replacing the file atomically. A file with the user's
// own settings is left alone (ErrForeignDaskConfig) unless merge: then
// its other settings are kept, the gateway's keys set, and the file as
// it was is kept next to it (.bak, mode 0600). It returns what the file
// was before, and notes for the user (a directory made private).
func WriteDaskConfig(path string, c DaskConfig, merge bool) (DaskFileState, []string, error) {
	state, _, err := ReadDaskConfig(path)
	if err != nil {
		return 0, nil, err
	}
	text, err := c.Render()
	if err != nil {
		return 0, nil, err
	}
	if state == DaskFileForeign {
		if !merge {
			return state, nil, ErrForeignDaskConfig
		}
		if text, err = mergeDaskConfig(path, c); err != nil {
			return state, nil, err
		}
	}
	notes, err := privateDir(filepath.Dir(path))
	if err != nil {
		return state, notes, err
	}
	if state == DaskFileForeign {
		old, err := os.ReadFile(path)
		if err == nil {
			err = writeAtomic(path+".bak", old)
		}
		if err != nil {
			return state, notes, fmt.Errorf("keep a copy of %s: %w", path, err)
		}
		notes = append(notes, "your file as it was is in "+path+".bak")
	}
	return state, notes, writeAtomic(path, text)
}

// mergeDaskConfig is the user's file with the gateway's keys set (and the
// spellings of them with underscores, which dask takes for the same keys,
// removed), after the marker.
func mergeDaskConfig(path string, c DaskConfig) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s is not YAML that can be merged (%w): fix it, or move it away and run gateway dask-config again", path, err)
	}
	if doc == nil {
		doc = map[string]any{}
	}
	gw, _ := doc["gateway"].(map[string]any)
	if gw == nil {
		gw = map[string]any{}
	}
	proxy, err := ProxyAddress(c.Gateway)
	if err != nil {
		return nil, err
	}
	for k, v := range c.section(proxy) {
		delete(gw, strings.ReplaceAll(k, "-", "_"))
		gw[k] = v
	}
	doc["gateway"] = gw
	body, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	head, err := c.Render()
	if err != nil {
		return nil, err
	}
	// The marker and notes of Render, then the merged settings.
	head = head[:bytes.Index(head, []byte("\ngateway:"))+1]
	return append(append(head, "# Merged into your own settings.\n"...), body...), nil
}

// privateDir makes dir (mode 0700), or makes an existing one of the
// user's private; one owned by someone else is refused: the file will
// hold a credential.
func privateDir(dir string) ([]string, error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	if !ownedByMe(fi) {
		return nil, fmt.Errorf("%s belongs to another user: the dask configuration holds a credential and goes only in a directory of yours (set DASK_CONFIG)", dir)
	}
	if fi.Mode().Perm()&0o077 == 0 {
		return nil, nil
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make %s private: %w", dir, err)
	}
	return []string{fmt.Sprintf("made %s private (mode 0700, was %04o): it now holds a credential", dir, fi.Mode().Perm())}, nil
}

// writeAtomic writes b to path with mode 0600 through a new file renamed
// over it: a reader never sees half a file, and a link at path is
// replaced, not followed.
func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".gateway-*.tmp") // mode 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// RemoveDaskConfig removes the file at path if this package wrote it, and
// returns the token it held ("" when it removed nothing).
func RemoveDaskConfig(path, gateway string) (string, error) {
	state, c, err := ReadDaskConfig(path)
	if err != nil || state != DaskFileOurs || Key(c.Gateway) != Key(gateway) {
		return "", err
	}
	return c.TokenID, os.Remove(path)
}

// DaskOverrides are what may take the file's place in dask's view: the
// environment's DASK_GATEWAY__* variables (over every file), and other
// files of the directory that set gateway keys (read after it when they
// sort after it).
func DaskOverrides(dir string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(strings.ToUpper(k), "DASK_GATEWAY__") {
			out = append(out, "the environment variable "+k)
		}
	}
	slices.Sort(out)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || e.Name() == daskConfigFile || (ext != ".yaml" && ext != ".yml" && ext != ".json") || e.Name() <= daskConfigFile {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		var doc map[string]any
		if err == nil && yaml.Unmarshal(b, &doc) == nil && doc["gateway"] != nil {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// DaskTokenLifetime is how long the dask configuration's token lasts;
// each gateway login makes a new one.
const DaskTokenLifetime = 90 * 24 * time.Hour

// ownedByMe says whether this process's user owns the file.
func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || int(st.Uid) == os.Getuid()
}
