package gateway_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDocLinks checks that every relative link of README.md and docs/*.md
// names a file or folder of the repository and, with a #fragment into a
// Markdown page, one of that page's headings: the README is the front
// door, and a link that leads nowhere is a door that does not open.
func TestDocLinks(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{"README.md"}, pages...)
	if len(pages) < 2 {
		t.Fatalf("no pages in docs/: %q", pages)
	}
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		links := markdownLinks(string(text))
		if len(links) == 0 && page == "README.md" {
			t.Errorf("%s links to nothing: the front door must lead to the docs", page)
		}
		for _, l := range links {
			if msg := checkLink(page, l); msg != "" {
				t.Errorf("%s: link %q: %s", page, l, msg)
			}
		}
	}
}

// TestDocLinksChecker checks the checker on pages of its own: a missing
// file, a missing heading and a link inside a code block.
func TestDocLinksChecker(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("docs/a.md", "# Page A\n\n## Set-up: two commands\n\n```\n## not a heading\n```\n")
	write("docs/img.png", "png")
	readme := write("README.md", "x")
	for _, c := range []struct {
		link string
		ok   bool
	}{
		{"docs/a.md", true},
		{"docs/a.md#set-up-two-commands", true},
		{"docs/a.md#page-a", true},
		{"docs/img.png", true},
		{"docs/", true},
		{"https://example.org/x", true},
		{"docs/b.md", false},
		{"docs/a.md#not-a-heading", false},
		{"docs/a.md#quickstart", false},
		{"#nothing-here", false},
	} {
		if got := checkLink(readme, c.link) == ""; got != c.ok {
			t.Errorf("%q: resolves %v, want %v (%s)", c.link, got, c.ok, checkLink(readme, c.link))
		}
	}
	got := markdownLinks("see [a](docs/a.md) and ![i](docs/img.png \"title\")\n```\n[no](nowhere.md)\n```\n<https://x.org>")
	if want := []string{"docs/a.md", "docs/img.png"}; !slices.Equal(got, want) {
		t.Errorf("links %q, want %q", got, want)
	}
}

var linkRe = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// markdownLinks are the targets of a page's inline links and images,
// outside fenced code blocks.
func markdownLinks(text string) []string {
	var out []string
	for _, line := range proseLines(text) {
		for _, m := range linkRe.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// proseLines are a page's lines outside fenced code blocks.
func proseLines(text string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}

// checkLink says what is wrong with a link of page, or "".
func checkLink(page, link string) string {
	if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
		return ""
	}
	target, fragment, _ := strings.Cut(link, "#")
	file := page
	if target != "" {
		file = filepath.Join(filepath.Dir(page), filepath.FromSlash(target))
	}
	if _, err := os.Stat(file); err != nil {
		return "no such file " + file
	}
	if fragment == "" || !strings.HasSuffix(file, ".md") {
		return ""
	}
	text, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	if !slices.Contains(headingAnchors(string(text)), fragment) {
		return "no heading of " + file + " has the anchor #" + fragment
	}
	return ""
}

var headingRe = regexp.MustCompile(`^#{1,6} (.+)$`)

// headingAnchors are the anchors GitHub gives a page's headings: lower
// case, punctuation other than - and _ dropped, spaces as -, and -1, -2 on
// repeats.
func headingAnchors(text string) []string {
	var out []string
	seen := map[string]int{}
	drop := regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
	for _, line := range proseLines(text) {
		m := headingRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), ""), " ", "-")
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		out = append(out, a)
	}
	return out
}
