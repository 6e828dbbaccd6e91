package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newAdaptCmd(g *globals) *cobra.Command {
	var minimum, maximum int
	var off bool
	cmd := &cobra.Command{
		Use:   "adapt NAME --minimum N --maximum M | --off",
		Short: "Let the scheduler's demand set the number of workers, within bounds",
		Long: `Turn on adaptive scaling: the gateway follows the Dask scheduler's own
estimate of the workers its load needs (what Dask's Adaptive follows), within
--minimum and --maximum, scaling up at once and down once the demand has stayed
lower for a few seconds. A manual "gateway scale" turns it off; so does --off.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !off && !cmd.Flags().Changed("maximum") {
				return fmt.Errorf("give the bounds: gateway adapt %s --minimum 0 --maximum 10 (or --off)", args[0])
			}
			if !off && (minimum < 0 || maximum < minimum) {
				return fmt.Errorf("need 0 <= --minimum <= --maximum")
			}
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			msg, err := c.Adapt(cmd.Context(), args[0], minimum, maximum, !off)
			if err != nil {
				return err
			}
			if msg != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", msg)
			}
			if off {
				fmt.Fprintf(cmd.OutOrStdout(), "Cluster %s: adaptive scaling off\n", args[0])
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "Cluster %s: adaptive scaling between %d and %d workers\n", args[0], minimum, maximum)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&minimum, "minimum", 0, "fewest workers")
	cmd.Flags().IntVar(&maximum, "maximum", 0, "most workers")
	cmd.Flags().BoolVar(&off, "off", false, "turn adaptive scaling off (the workers stay as they are)")
	return cmd
}
