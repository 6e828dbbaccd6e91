package main

import (
	"fmt"
	"os/exec"

	"github.com/spf13/cobra"
)

func newDashboardCmd(g *globals) *cobra.Command {
	var open bool
	cmd := &cobra.Command{
		Use:   "dashboard NAME",
		Short: "Print a one-time link that signs your browser in and opens the cluster's dashboard",
		Long: `Print a sign-in link for the cluster's dashboard. The link works once, within
two minutes, and sets a browser session for this gateway; after that the plain
dashboard URL works in that browser. With curl, send your token instead:
  curl -H "Authorization: Bearer $(gateway print-token)" URL`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			link, err := c.DashboardLink(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), link)
			// Stdout stays the link alone, for scripts; the warning goes
			// to stderr, and its absence (an older gateway) is no error.
			if d, err := c.Get(cmd.Context(), args[0]); err == nil && d.DashboardProblem != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "note: "+d.DashboardProblem)
			}
			if open {
				if path, err := exec.LookPath("xdg-open"); err == nil {
					return exec.Command(path, link).Start()
				}
				fmt.Fprintln(cmd.ErrOrStderr(), "no xdg-open here: open the link above in your browser")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&open, "open", false, "open the link with xdg-open")
	return cmd
}
