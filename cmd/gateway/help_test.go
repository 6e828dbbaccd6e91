package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gatewayhq/gateway/server"
)

// TestEveryHelp renders every command's --help and checks that what it
// names exists: each --flag is a flag of some command, and each
// configuration key it cites ("key x.y", "providers.local.python") is a
// key of gateway.yaml. It also keeps out phrases of removed behaviour.
func TestEveryHelp(t *testing.T) {
	root := newRootCmd()
	flags := map[string]bool{"help": true, "version": true}
	var all []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		all = append(all, c)
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { flags[f.Name] = true })
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	keys := server.ConfigSchema().Docs()
	flagRe := regexp.MustCompile(`(?:^|[\s(\x60"'])--([a-z][a-z0-9-]+)`)
	keyRe := regexp.MustCompile(`\b(?:key|keys) ([a-z_]+(?:\.[a-z_]+)+)|\b((?:providers|auth|tls|proxy|quotas|cluster|images|database|log|envs)\.[a-z_]+(?:\.[a-z_]+)*)\b`)
	removed := []string{"static token", "trusts one"}
	for _, c := range all {
		path := strings.TrimSpace(strings.TrimPrefix(c.CommandPath(), "gateway"))
		t.Run(c.CommandPath(), func(t *testing.T) {
			r := newRootCmd()
			var out bytes.Buffer
			r.SetOut(&out)
			r.SetErr(&out)
			r.SetArgs(append(strings.Fields(path), "--help"))
			if err := r.Execute(); err != nil {
				t.Fatalf("--help: %v", err)
			}
			help := out.String()
			summary := c.Long
			if summary == "" {
				summary = c.Short
			}
			if c.Short == "" || !strings.Contains(help, "Usage:") || !strings.Contains(help, strings.TrimSpace(summary)) {
				t.Fatalf("help does not render usage and its summary:\n%s", help)
			}
			for _, m := range flagRe.FindAllStringSubmatch(help, -1) {
				if !flags[m[1]] {
					t.Errorf("help names --%s, which no command has", m[1])
				}
			}
			for _, m := range keyRe.FindAllStringSubmatch(help, -1) {
				k := m[1] + m[2]
				if _, ok := keys[k]; !ok && !hasKeyPrefix(keys, k) {
					t.Errorf("help names configuration key %q, which gateway.yaml does not have", k)
				}
			}
			for _, p := range removed {
				if strings.Contains(strings.ToLower(help), p) {
					t.Errorf("help still says %q", p)
				}
			}
		})
	}
}

// hasKeyPrefix accepts a section ("providers.local") that holds keys.
func hasKeyPrefix(keys map[string]string, k string) bool {
	for name := range keys {
		if strings.HasPrefix(name, k+".") {
			return true
		}
	}
	return false
}
