package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gatewayhq/gateway/server"
)

// TestDocsReference checks the reference pages against the code: every
// key of gateway.yaml is on docs/configuration.md, and every command of
// the CLI on docs/using.md, so that adding either without its line fails.
func TestDocsReference(t *testing.T) {
	config := readDoc(t, "configuration.md")
	var keys []string
	for k := range server.ConfigSchema().Docs() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !configDocumented(config, k) {
			t.Errorf("configuration key %s is not on docs/configuration.md (add a row: key, environment, default, meaning)", k)
		}
	}
	using := readDoc(t, "using.md")
	for _, c := range commands(newRootCmd()) {
		if !commandDocumented(using, c) {
			t.Errorf("command %q is not on docs/using.md (add it to the table of commands)", c.CommandPath())
		}
	}
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// commands are every runnable, visible command under root.
func commands(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c != root {
			// A hidden command's subcommands are hidden with it.
			if !c.IsAvailableCommand() || c.Name() == "help" || c.Name() == "completion" {
				return
			}
			out = append(out, c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

// configDocumented: the page names the key in backticks, or the key's
// section has a row of its own ("`providers.docker.*`") whose text names
// the rest of the key in backticks.
func configDocumented(page, key string) bool {
	if strings.Contains(page, "`"+key+"`") {
		return true
	}
	for i := strings.LastIndex(key, "."); i > 0; i = strings.LastIndex(key[:i], ".") {
		row := rowOf(page, "`"+key[:i]+".*`")
		if row != "" && strings.Contains(row, "`"+key[i+1:]+"`") {
			return true
		}
	}
	return false
}

// commandDocumented: the page names "gateway <path>", or a row that names
// its parent ("gateway token create") names it as "`token list".
func commandDocumented(page string, c *cobra.Command) bool {
	path := strings.TrimPrefix(c.CommandPath(), "gateway ")
	if strings.Contains(page, "`gateway "+path) {
		return true
	}
	if !c.HasParent() || !c.Parent().HasParent() {
		return false
	}
	parent := strings.TrimPrefix(c.Parent().CommandPath(), "gateway ")
	// "`gateway admin quota list\|get\|set`": the alternatives after the
	// parent, as a table cell writes them.
	for rest := page; ; {
		i := strings.Index(rest, "`gateway "+parent+" ")
		if i < 0 {
			break
		}
		rest = rest[i+len("`gateway "+parent+" "):]
		word, _, _ := strings.Cut(rest, " ")
		word, _, _ = strings.Cut(word, "`")
		for _, alt := range strings.Split(strings.ReplaceAll(word, `\|`, "|"), "|") {
			if alt == c.Name() {
				return true
			}
		}
	}
	for _, row := range rowsOf(page, "`gateway "+parent) {
		if strings.Contains(row, "`"+path) || strings.Contains(row, ", "+path) {
			return true
		}
	}
	return false
}

func rowOf(page, s string) string {
	if rows := rowsOf(page, s); len(rows) > 0 {
		return rows[0]
	}
	return ""
}

// rowsOf are the lines of page that contain s.
func rowsOf(page, s string) []string {
	var out []string
	for _, line := range strings.Split(page, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}
