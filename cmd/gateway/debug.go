package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/server"
)

// newDebugCmd holds commands for testing the gateway itself, hidden from
// the help that users read.
func newDebugCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "debug", Short: "Commands for testing the gateway itself", Hidden: true}
	cmd.AddCommand(&cobra.Command{
		Use:   "crash-points",
		Short: "List the crash points that " + crashpoint.EnvVar + " can name",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, n := range server.CrashPoints() {
				fmt.Fprintln(cmd.OutOrStdout(), n)
			}
			return nil
		},
	})
	return cmd
}
