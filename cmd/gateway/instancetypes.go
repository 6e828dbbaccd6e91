package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newInstanceTypesCmd(g *globals) *cobra.Command {
	var gpu bool
	cmd := &cobra.Command{
		Use:   "instance-types",
		Short: "List the machine types you may ask for, cheapest first (cloud backends)",
		Example: `  gateway instance-types --gpu
  gateway new-cluster --worker-vm-type g5.xlarge`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			types, err := c.InstanceTypes(cmd.Context(), gpu)
			if err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), types)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVCPUS\tMEMORY\tGPUS\tEST. PRICE/H")
			for _, t := range types {
				gpus := "-"
				if t.GPUs > 0 {
					gpus = fmt.Sprintf("%d x %s", t.GPUs, t.GPUType)
				}
				fmt.Fprintf(tw, "%s\t%d\t%g GiB\t%s\t$%.3f\n", t.Name, t.VCPUs, t.MemoryGiB, gpus, t.PriceHour)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&gpu, "gpu", false, "only types with GPUs")
	return cmd
}
