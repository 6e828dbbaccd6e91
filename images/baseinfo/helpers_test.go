package baseinfo

import (
	"archive/tar"
	"bytes"
	"io"
	"path"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ent is one tar entry of a synthetic layer.
type ent struct {
	name string
	typ  byte
	body string
	link string
	mode int64
}

func reg(name, body string) ent { return ent{name: name, typ: tar.TypeReg, body: body, mode: 0o644} }
func exe(name string) ent       { return ent{name: name, typ: tar.TypeReg, body: "\x7fELF", mode: 0o755} }
func sym(name, target string) ent {
	return ent{name: name, typ: tar.TypeSymlink, link: target, mode: 0o777}
}
func hard(name, target string) ent {
	return ent{name: name, typ: tar.TypeLink, link: target, mode: 0o644}
}
func dirent(name string) ent { return ent{name: name, typ: tar.TypeDir, mode: 0o755} }

// wh whites out name in a lower layer; opq makes dir opaque.
func wh(name string) ent {
	return reg(path.Join(path.Dir(name), ".wh."+path.Base(name)), "")
}
func opq(dir string) ent { return reg(path.Join(dir, ".wh..wh..opq"), "") }

// meta is a dist-info's METADATA; the description after the blank line has
// a decoy Name that must not be read.
func meta(dir, name, version string) ent {
	return reg(path.Join(dir, name+"-"+version+".dist-info", "METADATA"),
		"Metadata-Version: 2.1\nName: "+name+"\nVersion: "+version+"\nLicense: line one\n        Name: folded decoy\nSummary: test\n\nName: decoy\nVersion: 0\n")
}

// pkgInfo is an egg-info file or PKG-INFO in Debian's style.
func pkgInfo(file, name, version string) ent {
	return reg(file, "Metadata-Version: 2.1\nName: "+name+"\nVersion: "+version+"\n")
}

// libcBody puts glibc's version string across a 64 KiB boundary, where a
// scan without overlap would miss it.
func libcBody(version string) string {
	s := "GNU C Library (Debian GLIBC " + version + "-9+deb12u4) stable release version " + version + ".\n"
	return "\x7fELF" + strings.Repeat("\x00\x01", (65536-4-20)/2) + s + strings.Repeat("\x00", 1000)
}

func layerOf(t *testing.T, ents []ent) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, ModTime: time.Unix(0, 0)}
		if e.typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// imageOf builds an image from layers (bottom first) with cfg and arch.
func imageOf(t *testing.T, arch string, cfg v1.Config, layers ...[]ent) v1.Image {
	t.Helper()
	cf, err := empty.Image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Config = arch, "linux", cfg
	img, err := mutate.ConfigFile(empty.Image, cf)
	if err != nil {
		t.Fatal(err)
	}
	var ls []v1.Layer
	for _, ents := range layers {
		ls = append(ls, layerOf(t, ents))
	}
	img, err = mutate.AppendLayers(img, ls...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}
