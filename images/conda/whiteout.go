package conda

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
)

// WriteRemovalLayer writes a deterministic layer tar that removes, with OCI
// whiteouts, a conda package the base image has at another version or
// build: every file its conda-meta record (record, the JSON of
// <prefix>/conda-meta/<name>-<version>-<build>.json in the base) lists, and
// the record itself. Put it below the new package's layer, so that conda in
// the image sees one record per package and no stale files of the old one
// remain. The record comes from the base image: its paths are checked like
// a package's.
func WriteRemovalLayer(record []byte, prefix string, maxFiles int, w io.Writer) error {
	if !path.IsAbs(prefix) || path.Clean(prefix) != prefix || prefix == "/" {
		return fmt.Errorf("prefix %q is not a clean absolute directory", prefix)
	}
	if maxFiles <= 0 {
		maxFiles = DefaultMaxFiles
	}
	var rec struct {
		Name    string   `json:"name"`
		Version string   `json:"version"`
		Build   string   `json:"build"`
		Files   []string `json:"files"`
	}
	if err := json.Unmarshal(record, &rec); err != nil {
		return fmt.Errorf("conda-meta record: %w", err)
	}
	what := fmt.Sprintf("conda-meta record of %s %s=%s", rec.Name, rec.Version, rec.Build)
	if len(rec.Files) > maxFiles {
		return fmt.Errorf("%s lists %d files, more than %d", what, len(rec.Files), maxFiles)
	}
	metaName := "conda-meta/" + rec.Name + "-" + rec.Version + "-" + rec.Build + ".json"
	if c, err := cleanPath(metaName); err != nil || c != metaName || strings.Count(metaName, "/") != 1 {
		return fmt.Errorf("%s: name, version or build makes a bad file name %q", what, metaName)
	}
	root := strings.TrimPrefix(prefix, "/")
	seen := map[string]bool{}
	var wh []string
	for _, f := range append(slices.Clone(rec.Files), metaName) {
		c, err := cleanPath(f)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		full := root + "/" + c
		e := path.Join(path.Dir(full), ".wh."+path.Base(full))
		if !seen[e] {
			seen[e] = true
			wh = append(wh, e)
		}
	}
	// Parent directories come first, as in any layer.
	dirs := map[string]bool{}
	for _, e := range wh {
		for d := path.Dir(e); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	names := slices.Clone(wh)
	for d := range dirs {
		names = append(names, d+"/")
	}
	slices.Sort(names)
	tw := tar.NewWriter(w)
	for _, n := range names {
		h := &tar.Header{Name: n, ModTime: layerEpoch, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Mode: 0o644}
		if strings.HasSuffix(n, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	return tw.Close()
}
