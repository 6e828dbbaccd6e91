package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newTokenCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "API tokens for automation (CI, scripts)"}
	var name, expires string
	var readOnly bool
	create := &cobra.Command{
		Use:   "create --name NAME [--expires 30d] [--read-only]",
		Short: "Create an API token; it is printed once and only its hash is kept",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return fmt.Errorf("name the token: gateway token create --name ci")
			}
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			t, err := c.CreateToken(cmd.Context(), name, expires, readOnly)
			if err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), t)
			}
			fmt.Fprintln(cmd.OutOrStdout(), t.Token)
			exp := "never"
			if t.ExpiresAt != nil {
				exp = t.ExpiresAt.Local().Format(time.RFC3339)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Token %s (%s) created; it expires %s%s. It is shown only now: store it safely.\nUse it with: export GATEWAY_TOKEN=...\n",
				t.ID, t.Name, exp, map[bool]string{true: ", read-only", false: ""}[t.ReadOnly])
			return nil
		},
	}
	create.Flags().StringVar(&name, "name", "", "what the token is for, e.g. ci")
	create.Flags().StringVar(&expires, "expires", "30d", "lifetime: days (30d) or a duration (12h); at most 366d")
	create.Flags().BoolVar(&readOnly, "read-only", false, "the token may only read (list, show, logs)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List your API tokens",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			ts, err := c.ListTokens(cmd.Context())
			if err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), ts)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tREAD-ONLY\tCREATED\tEXPIRES\tLAST USED\tREVOKED")
			for _, t := range ts {
				exp, used := "never", "-"
				if t.ExpiresAt != nil {
					exp = t.ExpiresAt.Local().Format("2006-01-02 15:04")
				}
				if t.LastUsed != nil {
					used = t.LastUsed.Local().Format("2006-01-02 15:04")
				}
				fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\t%v\n", t.ID, t.Name, t.ReadOnly, t.CreatedAt.Local().Format("2006-01-02 15:04"), exp, used, t.Revoked)
			}
			return tw.Flush()
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke one of your API tokens",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			if err := c.RevokeToken(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Token %s revoked\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func newSessionsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List your browser sessions (dashboards); end them with: gateway sessions revoke",
		Long: `Browser sessions sign dashboards in, made by "gateway dashboard" links or by
signing in with the identity provider in a browser. Each lasts auth.session_ttl
(8h by default) unless it ends first: signing out in the browser ends that
session, "gateway logout" ends all of yours, and revoking an API token ends the
sessions its dashboard links made.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			ss, err := c.ListSessions(cmd.Context())
			if err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), ss)
			}
			if len(ss) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "No active browser sessions")
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tVIA\tTOKEN\tREAD-ONLY\tCREATED\tEXPIRES")
			for _, s := range ss {
				tok := s.TokenID
				if tok == "" {
					tok = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s\n", s.ID, s.Via, tok, s.ReadOnly,
					s.CreatedAt.Local().Format("2006-01-02 15:04"), s.ExpiresAt.Local().Format("2006-01-02 15:04"))
			}
			return tw.Flush()
		},
	}
	var all bool
	revoke := &cobra.Command{
		Use:   "revoke ID | --all",
		Short: "End one of your browser sessions, or all of them",
		Args: func(_ *cobra.Command, args []string) error {
			if all == (len(args) == 1) || len(args) > 1 {
				return fmt.Errorf("name one session (gateway sessions revoke ses_...) or pass --all")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			if all {
				n, err := c.RevokeSessions(cmd.Context())
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%d browser session(s) ended\n", n)
				return nil
			}
			if err := c.RevokeSession(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Session %s ended\n", args[0])
			return nil
		},
	}
	revoke.Flags().BoolVar(&all, "all", false, "end every browser session of yours")
	cmd.AddCommand(revoke)
	return cmd
}
