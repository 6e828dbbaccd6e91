package main

import "github.com/spf13/cobra"

// newBenchCmd is the parent of the benchmark commands: run and schedule
// (bench_run.go) start work; history, report and check (bench_results.go)
// read what runs recorded.
func newBenchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmarks and A/B tests of environments on identical clusters",
		Long: `Benchmarks and A/B tests of Dask environments on identical clusters.

Run:     gateway bench run SUITE --env A [--env B] [--repeat N] [--null]
         gateway bench schedule SUITE --env E --cron '0 2 * * *'
Results: gateway bench history TEST [--env E]
         gateway bench report RUN [--html FILE]
         gateway bench check --env E [--window 7d] [--threshold 10%]`,
	}
	addBenchResultsCmds(cmd, g)
	addBenchRunCmds(cmd, g)
	return cmd
}
