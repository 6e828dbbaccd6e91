package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gatewayhq/gateway/client"
)

// daskConfigNote says what makes dask_gateway.Gateway() with no
// arguments reach gateway, for the snippets new-cluster and show print.
func daskConfigNote(gateway string) string {
	_, path, err := client.DaskConfigPath()
	if err != nil {
		return "Gateway() needs this gateway in your dask configuration: run " + cliName() + " dask-config"
	}
	state, c, err := client.ReadDaskConfig(path)
	if err == nil && state == client.DaskFileOurs && client.Key(c.Gateway) == client.Key(gateway) {
		return "Gateway() finds this gateway in " + path + ", written by gateway login"
	}
	return "Gateway() needs this gateway in your dask configuration (" + path + "): run " + cliName() + " dask-config"
}

func newDaskConfigCmd(g *globals) *cobra.Command {
	var merge, print bool
	cmd := &cobra.Command{
		Use:   "dask-config [--merge | --print]",
		Short: "Write the dask configuration that makes dask_gateway's Gateway() reach this gateway (gateway login does it)",
		Long: `Write dask_gateway's configuration, so that in your Python
  from dask_gateway import Gateway; Gateway().new_cluster()
reaches this gateway as you, with no arguments. It goes in ~/.config/dask/gateway.yaml
(or $DASK_CONFIG/gateway.yaml), mode 0600 in a directory of mode 0700, and holds an
API token made for it ("dask-config", 90 days; gateway login makes a new one and
revokes the old, gateway logout revokes it). A file with settings of your own is
left unchanged unless --merge (your settings are kept, and the file as it was is
kept as gateway.yaml.bak). --print prints the configuration instead of writing it.
The environment's DASK_GATEWAY__* variables override the file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if merge && print {
				return errors.New("--merge writes the file, --print does not: choose one")
			}
			s, err := g.session(cmd.Context())
			if err != nil {
				return err
			}
			c, err := g.clientFor(s.url, s.token, s.entry.CAFile)
			if err != nil {
				return err
			}
			if print {
				return printDaskConfig(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), c)
			}
			return writeDaskConfig(cmd.Context(), cmd.OutOrStdout(), c, merge, true)
		},
	}
	cmd.Flags().BoolVar(&merge, "merge", false, "keep the settings of your own file and set the gateway's keys in it")
	cmd.Flags().BoolVar(&print, "print", false, "print the configuration (with a new token) instead of writing it")
	return cmd
}

// newDaskToken makes the token the dask configuration holds.
func newDaskToken(ctx context.Context, c *client.Client) (client.DaskConfig, error) {
	who, err := c.Whoami(ctx)
	if err != nil {
		return client.DaskConfig{}, err
	}
	t, err := c.CreateToken(ctx, "dask-config", fmt.Sprintf("%dd", int(client.DaskTokenLifetime.Hours()/24)), false)
	if err != nil {
		return client.DaskConfig{}, fmt.Errorf("make the dask configuration's API token: %w", err)
	}
	name, _ := who["name"].(string)
	return client.DaskConfig{Gateway: c.BaseURL(), User: name, Token: t.Token, TokenID: t.ID}, nil
}

func printDaskConfig(ctx context.Context, out, notes io.Writer, c *client.Client) error {
	dc, err := newDaskToken(ctx, c)
	if err != nil {
		return err
	}
	text, err := dc.Render()
	if err != nil {
		return err
	}
	_, path, _ := client.DaskConfigPath()
	fmt.Fprintf(notes, "API token %s made for it: keep what follows private (mode 0600), e.g. in %s; revoke it with gateway token revoke %s\n", dc.TokenID, path, dc.TokenID)
	_, err = out.Write(text)
	return err
}

// writeDaskConfig writes the dask configuration with a new token, and
// revokes the token of the file it replaces. A file with settings of the
// user's own is left alone without merge; then, when asked (strict), it
// is an error, else (after a login) a note of what to do.
func writeDaskConfig(ctx context.Context, w io.Writer, c *client.Client, merge, strict bool) error {
	dir, path, err := client.DaskConfigPath()
	if err != nil {
		return err
	}
	state, old, err := client.ReadDaskConfig(path)
	if err != nil {
		return err
	}
	if state == client.DaskFileForeign && !merge {
		msg := fmt.Sprintf("your dask configuration %s has settings of your own: left unchanged. For dask_gateway's Gateway() with no arguments, "+
			"run gateway dask-config --merge (keeps your settings, and the file as it was in gateway.yaml.bak), "+
			"or see the settings with gateway dask-config --print", path)
		if strict {
			return errors.New(msg)
		}
		fmt.Fprintln(w, "Note: "+msg)
		return nil
	}
	dc, err := newDaskToken(ctx, c)
	if err != nil {
		return err
	}
	_, notes, err := client.WriteDaskConfig(path, dc, merge)
	if err != nil {
		_ = c.RevokeToken(ctx, dc.TokenID) // nothing holds it
		return fmt.Errorf("write the dask configuration: %w", err)
	}
	if state == client.DaskFileOurs && old.TokenID != "" {
		if client.Key(old.Gateway) != client.Key(c.BaseURL()) {
			notes = append(notes, fmt.Sprintf("it held a token of %s (%s): revoke it there with gateway --gateway %s token revoke %s", old.Gateway, old.TokenID, old.Gateway, old.TokenID))
		} else if err := c.RevokeToken(ctx, old.TokenID); err != nil && !strings.Contains(err.Error(), "not found") {
			notes = append(notes, fmt.Sprintf("its previous token %s could not be revoked (%v): gateway token revoke %s", old.TokenID, err, old.TokenID))
		}
	}
	fmt.Fprintf(w, "Wrote %s (mode 0600): dask_gateway's Gateway() now reaches %s as %s\n", path, dc.Gateway, dc.User)
	for _, n := range notes {
		fmt.Fprintln(w, "  "+n)
	}
	for _, o := range client.DaskOverrides(dir) {
		fmt.Fprintf(w, "  warning: %s sets dask_gateway's settings over this file\n", o)
	}
	return nil
}

// removeDaskConfig removes the dask configuration of this gateway that
// gateway login wrote, and revokes its token.
func removeDaskConfig(ctx context.Context, w io.Writer, c *client.Client) error {
	_, path, err := client.DaskConfigPath()
	if err != nil {
		return err
	}
	id, err := client.RemoveDaskConfig(path, c.BaseURL())
	if err != nil || id == "" {
		return err
	}
	if err := c.RevokeToken(ctx, id); err != nil && !strings.Contains(err.Error(), "not found") {
		return fmt.Errorf("removed %s, but its token %s was not revoked (%w): gateway token revoke %s", path, id, err, id)
	}
	fmt.Fprintf(w, "Removed %s and revoked its token\n", path)
	return nil
}
