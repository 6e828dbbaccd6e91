package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gatewayhq/gateway/providers/catalog"
)

func newInstanceTypesCmd(g *globals) *cobra.Command {
	var gpu bool
	cmd := &cobra.Command{
		Use:   "instance-types",
		Short: "List the machine types you may ask for, cheapest first, unpriced last (cloud backends)",
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
				// price_hour is null for an unpriced type.
				return printJSON(cmd.OutOrStdout(), types)
			}
			return printInstanceTypes(cmd.OutOrStdout(), types)
		},
	}
	cmd.Flags().BoolVar(&gpu, "gpu", false, "only types with (NVIDIA) GPUs")
	return cmd
}

// printInstanceTypes writes the table in the order given (the gateway's:
// cheapest first, unpriced last). A type nobody has priced says so rather
// than "$0.000", which would read as free.
func printInstanceTypes(w io.Writer, types []catalog.InstanceType) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVCPUS\tMEMORY\tGPUS\tEST. PRICE/H")
	for _, t := range types {
		gpus := "-"
		if t.GPUs > 0 {
			gpus = fmt.Sprintf("%d x %s", t.GPUs, t.GPUType)
		}
		price := fmt.Sprintf("$%.3f", t.PriceHour)
		if t.Unpriced {
			price = "unpriced"
		}
		fmt.Fprintf(tw, "%s\t%d\t%g GiB\t%s\t%s\n", t.Name, t.VCPUs, t.MemoryGiB, gpus, price)
	}
	return tw.Flush()
}
