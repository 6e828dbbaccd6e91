package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gatewayhq/gateway/client"
	"github.com/gatewayhq/gateway/quota"
)

// budgetFigure is a monthly budget with the figure of the report it bounds.
type budgetFigure struct {
	field, label string
	used         float64
}

func budgetUse(u *client.MyUsageInfo) []budgetFigure {
	return []budgetFigure{
		{"monthly_vcpu_hours", "vCPU-hours", u.Total.VCPUHours},
		{"monthly_gpu_hours", "GPU-hours", u.Total.GPUHours},
	}
}

// budgetLine shows one budget: "12.50 of 100 (13%), from default (config)".
// Without used (a window other than this month) only the limit shows.
func budgetLine(b client.Budget, used float64, showUsed bool) string {
	src := ""
	if b.Source != "" {
		src = ", from " + b.Source
	}
	if !showUsed {
		return b.Limit.String() + " per calendar month" + src
	}
	pct := ""
	if !b.Limit.IsUnlimited() && b.Limit > 0 {
		pct = fmt.Sprintf(" (%.0f%%)", 100*used/float64(b.Limit))
	}
	return hours(used) + " of " + b.Limit.String() + pct + src
}

// printMyUsage writes the caller's use, their budgets and a table of
// their clusters. monthToDate says the window is this month so far, the
// window budgets count.
func printMyUsage(w io.Writer, u *client.MyUsageInfo, monthToDate bool) error {
	t := u.Total
	fmt.Fprintf(w, "Your use from %s:\n\n", window(u.Since, u.Until))
	fmt.Fprintf(w, "  vCPU-hours:      %s\n", hours(t.VCPUHours))
	fmt.Fprintf(w, "  GiB-hours:       %s\n", hours(t.MemoryGiBHours))
	gpu := hours(t.GPUHours)
	if len(t.GPUHoursByType) > 0 {
		gpu += "  (" + gpuTypeHours(t.GPUHoursByType) + ")"
	}
	fmt.Fprintf(w, "  GPU-hours:       %s\n", gpu)
	fmt.Fprintf(w, "  Estimated cost:  %s\n", usd(t.CostUSD))

	fmt.Fprintf(w, "\nMonthly budgets (calendar month, UTC):\n")
	shown := false
	for _, b := range budgetUse(u) {
		if budget, ok := u.Budgets[b.field]; ok {
			fmt.Fprintf(w, "  %-16s %s\n", b.label+":", budgetLine(budget, b.used, monthToDate))
			shown = true
		}
	}
	if !shown {
		fmt.Fprintln(w, "  none")
	}

	fmt.Fprintln(w)
	if len(u.Clusters) == 0 {
		fmt.Fprintln(w, "No clusters in this window")
		return nil
	}
	tw := newTabWriter(w)
	fmt.Fprintln(tw, "CLUSTER\tVCPU-H\tGIB-H\tGPU-H\tGPU-H BY TYPE\tEST. COST")
	running := false
	for _, r := range u.Clusters {
		mark := ""
		if r.Running {
			mark, running = "*", true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Cluster+mark, hours(r.VCPUHours), hours(r.MemoryGiBHours), hours(r.GPUHours),
			gpuTypeHours(r.GPUHoursByType), usd(r.CostUSD))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if running {
		fmt.Fprintln(w, "\n* still running: its figures keep growing")
	}
	return nil
}

func newUsageCmd(g *globals) *cobra.Command {
	var since, until string
	cmd := &cobra.Command{
		Use:   "usage [--since DATE] [--until DATE]",
		Short: "Show what your clusters used this month, against your monthly budgets",
		Long: `Show your clusters' use this month so far (UTC): vCPU-hours, GiB-hours,
GPU-hours and the estimated cost, each monthly budget as used of limit with the
quota entry it comes from, and one row per cluster. --since and --until
(exclusive) pick another window: dates such as 2026-11-01 or RFC 3339 times.`,
		Example: `  gateway usage
  gateway usage --since 2026-11-01 --until 2026-12-01
  gateway usage -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, c, err := g.formatAndConnect(cmd.Context())
			if err != nil {
				return err
			}
			u, err := c.MyUsage(cmd.Context(), since, until)
			if err != nil {
				return err
			}
			if f == "json" {
				return printJSON(cmd.OutOrStdout(), u)
			}
			return printMyUsage(cmd.OutOrStdout(), u, since == "" && until == "")
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "start: 2026-11-01 or an RFC 3339 time (default: start of this month, UTC)")
	cmd.Flags().StringVar(&until, "until", "", "end, exclusive (default: now)")
	return cmd
}

// inUseOf says what the caller's live clusters hold of a limit ("" when
// the limit is not about live clusters).
func inUseOf(u client.InUse, limit string) string {
	v, _ := quota.InUse(u).Of(limit)
	return v
}

func printMyQuota(w io.Writer, q *client.MyQuotaInfo) error {
	fmt.Fprintln(w, "Your limits, what your active clusters hold, and where each limit comes from:")
	fmt.Fprintln(w)
	tw := newTabWriter(w)
	fmt.Fprintln(tw, "LIMIT\tVALUE\tIN USE\tSOURCE")
	for _, r := range (quota.Effective{Limits: q.Limits, Sources: q.Sources}).Rows() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.Value, orDash(inUseOf(q.InUse, r.Name)), orDash(r.Source))
	}
	// GPU types in use that no limit names.
	for _, typ := range sortedKeys(q.InUse.GPUsByType) {
		if _, limited := q.Limits.MaxGPUsByType[typ]; !limited {
			fmt.Fprintf(tw, "%s.%s\t%s\t%d\t-\n", gpuTypes, typ, quota.KindGPUMap.UnsetValue(), q.InUse.GPUsByType[typ])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nMonthly budgets count this calendar month (UTC): see what you used with: gateway usage")
	switch quota.OnExceed(q.OnExceed) {
	case quota.Clamp:
		fmt.Fprintln(w, "A scale beyond a limit is clamped: the cluster scales to what fits, and you are told.")
	case quota.Refuse:
		fmt.Fprintln(w, "A scale beyond a limit is refused: the cluster keeps its workers.")
	}
	return nil
}

func newQuotaCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "quota",
		Short: "Show the limits that apply to you, where each comes from, and what you use now",
		Long: `Show your effective limits: for each, its value, what your active clusters
hold of it now, and the quota entry it comes from (your own, one of your groups',
or the default; set in the configuration file or through the admin API), or
"built-in default" for the gateway's own defaults, which an admin can raise.
"unlimited" and "any" mean no limit applies.`,
		Example: `  gateway quota
  gateway quota -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, c, err := g.formatAndConnect(cmd.Context())
			if err != nil {
				return err
			}
			q, err := c.MyQuota(cmd.Context())
			if err != nil {
				return err
			}
			if f == "json" {
				return printJSON(cmd.OutOrStdout(), q)
			}
			return printMyQuota(cmd.OutOrStdout(), q)
		},
	}
}
