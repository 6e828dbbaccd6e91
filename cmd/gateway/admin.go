package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/client"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/report"
)

// format reads --output for the commands of this file, which also take
// "table" for "text", and the extra formats given.
func (g *globals) format(extra ...string) (string, error) {
	switch o := strings.ToLower(g.output); {
	case o == "text" || o == "table":
		return "text", nil
	case o == "json" || slices.Contains(extra, o):
		return o, nil
	}
	return "", fmt.Errorf("--output %q: use %s", g.output, strings.Join(append([]string{"text (or table)", "json"}, extra...), ", "))
}

// connect builds an API client like globals.client, but leaves checking
// --output to the command (see format).
func (g *globals) connect(ctx context.Context) (*client.Client, error) {
	s, err := g.session(ctx)
	if err != nil {
		return nil, err
	}
	return g.clientFor(s.url, s.token, s.entry.CAFile)
}

// formatAndConnect checks --output first, so that a bad value is reported
// before any request.
func (g *globals) formatAndConnect(ctx context.Context, extra ...string) (string, *client.Client, error) {
	f, err := g.format(extra...)
	if err != nil {
		return "", nil, err
	}
	c, err := g.connect(ctx)
	return f, c, err
}

func newAdminCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Administer the gateway: quotas, every user's clusters, usage and the audit log (admins only)",
		Long: `Commands for the gateway's admins (auth.admin_users, auth.admin_groups).
Others get "admin only" from the gateway.

  gateway admin quota list                 every quota entry, limit by limit
  gateway admin quota get user:ann         an entry, and what applies to ann
  gateway admin quota set group:gpu --max-gpus 4
  gateway admin quota unset user:ann max_vcpus
  gateway admin clusters                   every user's active clusters
  gateway admin stop NAME                  stop any user's cluster
  gateway admin usage --since 2026-12-01   who used what
  gateway admin audit                      what admins changed
  gateway admin env publish NAME --env HASH   publish an environment for everyone`,
	}
	cmd.AddCommand(newAdminQuotaCmd(g), newAdminClustersCmd(g), newAdminStopCmd(g), newAdminUsageCmd(g), newAdminAuditCmd(g), newAdminEnvCmd(g))
	return cmd
}

// --- quota entries -------------------------------------------------------

func flagOf(field string) string { return strings.ReplaceAll(field, "_", "-") }

const gpuTypes = "max_gpus_by_type"

// quotaPatch builds the limits to set from flag values keyed by limit
// name. Every bad value is reported, each naming its flag.
func quotaPatch(given map[string]string) (quota.Limits, error) {
	if len(given) == 0 {
		var flags []string
		for _, name := range quota.FieldNames() {
			flags = append(flags, "--"+flagOf(name))
		}
		return quota.Limits{}, fmt.Errorf("nothing to set: give at least one of %s", strings.Join(flags, ", "))
	}
	l, err := quota.ParseText(given, func(name string) string { return "--" + flagOf(name) })
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), quota.ErrInvalid.Error()+": ")
		for _, name := range quota.FieldNames() {
			if v, ok := given[name]; ok && quota.KindOf(name) == quota.KindList && strings.TrimSpace(v) == "" {
				msg += "; to drop the limit: gateway admin quota unset SUBJECT " + name
			}
		}
		return quota.Limits{}, errors.New(msg)
	}
	return l, nil
}

// unsetNames reads the limits to unset, accepting flag spellings
// (max-vcpus) and max_gpus_by_type.<type>, and checks them as the server
// will.
func unsetNames(args []string) ([]string, error) {
	var names []string
	for _, a := range args {
		n := strings.TrimPrefix(strings.TrimSpace(a), "--")
		if typ, ok := strings.CutPrefix(n, flagOf(gpuTypes)+"."); ok {
			n = gpuTypes + "." + typ // keep the GPU type as written
		} else if !strings.HasPrefix(n, gpuTypes+".") {
			n = strings.ReplaceAll(n, "-", "_")
		}
		names = append(names, n)
	}
	var probe quota.Limits
	if err := probe.Unset(names); err != nil {
		return nil, fmt.Errorf("limits to unset: %w", err)
	}
	return names, nil
}

// limitRows lists the limits l sets, in display order: max_gpus_by_type
// is one row per type.
func limitRows(l quota.Limits) []quota.Row { return l.Rows() }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// entryOrigin says whether a limit of e came from the configuration file
// or the admin API. max_gpus_by_type.<type> is looked up per type: the
// server's sources name the whole map only.
func entryOrigin(e apitype.QuotaEntryJSON, row string) string {
	if typ, ok := strings.CutPrefix(row, gpuTypes+"."); ok {
		if e.Stored != nil {
			if _, ok := e.Stored.MaxGPUsByType[typ]; ok {
				return quota.FromAPI
			}
		}
		if e.Config != nil {
			if _, ok := e.Config.MaxGPUsByType[typ]; ok {
				return quota.FromConfig
			}
		}
		row = gpuTypes
	}
	if s := e.Sources[row]; s != "" {
		return s
	}
	return "-"
}

func newTabWriter(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// printQuotaList writes every entry, one row per limit.
func printQuotaList(w io.Writer, entries []apitype.QuotaEntryJSON) error {
	if len(entries) == 0 {
		fmt.Fprintln(w, "No quota entries: nobody has limits beyond the gateway's cluster.* settings.")
		fmt.Fprintln(w, "Set one with: gateway admin quota set default --max-clusters 2")
		return nil
	}
	tw := newTabWriter(w)
	fmt.Fprintln(tw, "SUBJECT\tLIMIT\tVALUE\tFROM")
	for _, e := range entries {
		rows := limitRows(e.Limits)
		if len(rows) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\n", e.Subject)
		}
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Subject, r.Name, r.Value, entryOrigin(e, r.Name))
		}
	}
	return tw.Flush()
}

// printEntry writes one subject's entry.
func printEntry(w io.Writer, e apitype.QuotaEntryJSON) error {
	fmt.Fprintf(w, "Subject:  %s\n", e.Subject)
	if e.UpdatedAt != nil {
		by := e.UpdatedBy
		if by == "" {
			by = "?"
		}
		fmt.Fprintf(w, "Changed:  %s by %s (through the admin API)\n", e.UpdatedAt.Local().Format(time.RFC3339), by)
	}
	rows := limitRows(e.Limits)
	if len(rows) == 0 {
		fmt.Fprintf(w, "Limits:   none set for %s\n", e.Subject)
		return nil
	}
	fmt.Fprintln(w)
	tw := newTabWriter(w)
	fmt.Fprintln(tw, "LIMIT\tVALUE\tFROM")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, r.Value, entryOrigin(e, r.Name))
	}
	return tw.Flush()
}

// printQuotaDetail writes an entry and, for a user, what applies to them.
func printQuotaDetail(w io.Writer, d *client.QuotaDetail) error {
	if err := printEntry(w, d.Entry); err != nil {
		return err
	}
	if d.Effective == nil {
		return nil
	}
	name := strings.TrimPrefix(d.Entry.Subject, "user:")
	groups := "no groups"
	if len(d.Groups) > 0 {
		groups = "groups " + strings.Join(d.Groups, ", ")
	}
	from := strings.ReplaceAll(d.GroupsFrom, "pass ?groups=", "pass --groups ")
	fmt.Fprintf(w, "\nWhat applies to %s, with %s (groups from %s):\n\n", name, groups, from)
	tw := newTabWriter(w)
	fmt.Fprintln(tw, "LIMIT\tVALUE\tSOURCE")
	for _, r := range (quota.Effective{Limits: d.Effective.Limits, Sources: d.Effective.Sources}).Rows() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, r.Value, orDash(r.Source))
	}
	return tw.Flush()
}

func subjectArg(s string) (string, error) {
	subj, err := quota.ParseSubject(s)
	if err != nil {
		return "", fmt.Errorf("SUBJECT: %w", err)
	}
	return string(subj), nil
}

func newAdminQuotaCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "See and change quota entries (subjects: default, user:NAME, group:NAME)",
		Long: `Quota entries limit what users may run. A subject is "default", "user:NAME"
or "group:NAME". Each limit resolves on its own: the user's entry, else the most
generous of their groups' entries, else the default entry, else no limit.
Entries come from the configuration file (quotas.entries) and from this API,
which overrides the file limit by limit. Under the default entry lie built-in
defaults (max_clusters 5, max_builds 2; none in gateway dev), listed as
"built-in": set the default entry's field to raise one, or to "unlimited".`,
	}
	cmd.AddCommand(newAdminQuotaListCmd(g), newAdminQuotaGetCmd(g), newAdminQuotaSetCmd(g), newAdminQuotaUnsetCmd(g))
	return cmd
}

func newAdminQuotaListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List every quota entry, one row per limit, and whether it comes from the config file or the API",
		Example: `  gateway admin quota list
  gateway admin quota list -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, c, err := g.formatAndConnect(cmd.Context())
			if err != nil {
				return err
			}
			l, err := c.AdminQuotas(cmd.Context())
			if err != nil {
				return err
			}
			if f == "json" {
				return printJSON(cmd.OutOrStdout(), l)
			}
			return printQuotaList(cmd.OutOrStdout(), l.Entries)
		},
	}
}

func newAdminQuotaGetCmd(g *globals) *cobra.Command {
	var groups []string
	cmd := &cobra.Command{
		Use:   "get SUBJECT [--groups a,b]",
		Short: "Show a subject's entry; for a user, also the limits that apply to them and where each comes from",
		Long: `Show a subject's quota entry. For user:NAME also show the limits that apply
to the user, resolved with their groups: those given with --groups, or else the
groups they had when they last made a cluster (the gateway only learns a user's
groups when they sign in).`,
		Example: `  gateway admin quota get default
  gateway admin quota get group:org/team
  gateway admin quota get user:ann --groups analysts,gpu`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			subj, err := subjectArg(args[0])
			if err != nil {
				return err
			}
			if len(groups) > 0 && !strings.HasPrefix(subj, "user:") {
				return fmt.Errorf("--groups applies to user:NAME subjects only, not %s", subj)
			}
			f, c, err := g.formatAndConnect(cmd.Context())
			if err != nil {
				return err
			}
			d, err := c.AdminQuota(cmd.Context(), subj, groups)
			if err != nil {
				return err
			}
			if f == "json" {
				return printJSON(cmd.OutOrStdout(), d)
			}
			return printQuotaDetail(cmd.OutOrStdout(), d)
		},
	}
	cmd.Flags().StringSliceVar(&groups, "groups", nil, "resolve a user's limits with these groups (default: their groups at their latest cluster)")
	return cmd
}

func newAdminQuotaSetCmd(g *globals) *cobra.Command {
	values := map[string]*string{}
	cmd := &cobra.Command{
		Use:   "set SUBJECT --LIMIT VALUE...",
		Short: "Set limits of a subject (merged into its stored entry; other limits stay as they are)",
		Long: `Set limits of a subject through the admin API. Only the limits given change;
they override the configuration file's entry for the subject, limit by limit.
Numbers take "unlimited" (to grant more than the default), lists take "*" (any).
To remove a limit again: gateway admin quota unset SUBJECT LIMIT.`,
		Example: `  gateway admin quota set default --max-clusters 2 --max-vcpus 16 --max-lifetime 8h
  gateway admin quota set group:gpu --max-gpus 4 --max-gpus-by-type a100=2,t4=4
  gateway admin quota set user:ann --max-vcpus unlimited --allowed-providers local,ec2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			subj, err := subjectArg(args[0])
			if err != nil {
				return err
			}
			given := map[string]string{}
			for name, v := range values {
				if cmd.Flags().Changed(flagOf(name)) {
					given[name] = *v
				}
			}
			patch, err := quotaPatch(given)
			if err != nil {
				return err
			}
			f, c, err := g.formatAndConnect(cmd.Context())
			if err != nil {
				return err
			}
			e, err := c.AdminSetQuota(cmd.Context(), subj, patch)
			if err != nil {
				return err
			}
			if f == "json" {
				return printJSON(cmd.OutOrStdout(), e)
			}
			return printEntry(cmd.OutOrStdout(), *e)
		},
	}
	for _, d := range quota.FieldDocs() {
		v := new(string)
		values[d[0]] = v
		cmd.Flags().StringVar(v, flagOf(d[0]), "", d[1]+" ("+quota.KindOf(d[0]).Hint()+")")
	}
	return cmd
}

func newAdminQuotaUnsetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "unset SUBJECT [LIMIT...]",
		Short: "Remove limits from a subject's stored entry (all of it when no limit is named)",
		Long: `Remove limits set through the admin API from a subject's entry, so that the
configuration file's entry (if any) or the next level applies again. With no
LIMIT the whole stored entry goes. Limits are named as in "quota list"
(max_vcpus or max-vcpus; max_gpus_by_type.a100 for one GPU type). Entries of
the configuration file are changed in the file.`,
		Example: `  gateway admin quota unset user:ann max_vcpus max_gpus_by_type.a100
  gateway admin quota unset group:gpu`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			subj, err := subjectArg(args[0])
			if err != nil {
				return err
			}
			names, err := unsetNames(args[1:])
			if err != nil {
				return err
			}
			f, c, err := g.formatAndConnect(cmd.Context())
			if err != nil {
				return err
			}
			e, err := c.AdminUnsetQuota(cmd.Context(), subj, names)
			if err != nil {
				return err
			}
			if f == "json" {
				return printJSON(cmd.OutOrStdout(), e)
			}
			if len(names) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "Removed the stored entry of %s; what remains (from the configuration file):\n\n", subj)
			}
			return printEntry(cmd.OutOrStdout(), *e)
		},
	}
}

// --- clusters ------------------------------------------------------------

func printAdminClusters(w io.Writer, list []apitype.ClusterDetail) error {
	if len(list) == 0 {
		fmt.Fprintln(w, "No clusters")
		return nil
	}
	tw := newTabWriter(w)
	fmt.Fprintln(tw, "NAME\tOWNER\tSTATUS\tWORKERS\tPROVIDER\tAGE")
	for _, d := range list {
		owner := d.OwnerName
		if owner == "" {
			owner = d.Owner
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", d.Name, orDash(owner), d.State, d.Workers.Ready, d.Workers.Requested,
			orDash(d.Provider), age(d.CreatedAt))
	}
	return tw.Flush()
}

func newAdminClustersCmd(g *globals) *cobra.Command {
	var all bool
	var status []string
	cmd := &cobra.Command{
		Use:   "clusters [--status RUNNING,PENDING | --all]",
		Short: "List every user's clusters (active ones unless --all or --status)",
		Example: `  gateway admin clusters
  gateway admin clusters --status FAILED
  gateway admin clusters --all -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, c, err := g.formatAndConnect(cmd.Context())
			if err != nil {
				return err
			}
			if all {
				status = []string{"all"}
			}
			list, err := c.AdminClusters(cmd.Context(), status)
			if err != nil {
				return err
			}
			if list == nil {
				list = []apitype.ClusterDetail{}
			}
			sort.SliceStable(list, func(i, j int) bool { return list[i].CreatedAt.After(list[j].CreatedAt) })
			if f == "json" {
				return printJSON(cmd.OutOrStdout(), list)
			}
			return printAdminClusters(cmd.OutOrStdout(), list)
		},
	}
	cmd.Flags().BoolVarP(&all, "all", "a", false, "include stopped and failed clusters")
	cmd.Flags().StringSliceVar(&status, "status", nil, "only these statuses (PENDING, RUNNING, STOPPING, STOPPED, FAILED)")
	return cmd
}

func newAdminStopCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "stop NAME",
		Short:   "Stop any user's cluster; the stop is recorded in the audit log",
		Example: `  gateway admin stop 3f9c2a1b`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			if err := c.AdminStop(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Cluster %s stopping (follow it with: gateway admin clusters --all)\n", args[0])
			return nil
		},
	}
}

// --- usage ---------------------------------------------------------------

func hours(v float64) string { return fmt.Sprintf("%.2f", v) }

func usd(v float64) string { return fmt.Sprintf("$%.2f", v) }

// gpuTypeHours shows GPU-hours per type: "a100=1.50 t4=2.00".
func gpuTypeHours(m map[string]float64) string {
	var parts []string
	for _, t := range sortedKeys(m) {
		parts = append(parts, t+"="+hours(m[t]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func window(since, until time.Time) string {
	const layout = "2006-01-02 15:04 MST"
	return since.UTC().Format(layout) + " to " + until.UTC().Format(layout)
}

// printUsageReport writes an admin usage report as a table with a total.
func printUsageReport(w io.Writer, rep *apitype.UsageReport) error {
	fmt.Fprintf(w, "Usage from %s, by %s\n\n", window(rep.Since, rep.Until), rep.By)
	if len(rep.Rows) == 0 {
		fmt.Fprintln(w, "No use in this window")
		return nil
	}
	byCluster := rep.By == "cluster"
	tw := newTabWriter(w)
	if byCluster {
		fmt.Fprintln(tw, "CLUSTER\tUSER\tVCPU-H\tGIB-H\tGPU-H\tGPU-H BY TYPE\tEST. COST")
	} else {
		fmt.Fprintln(tw, "USER\tCLUSTERS\tVCPU-H\tGIB-H\tGPU-H\tGPU-H BY TYPE\tEST. COST")
	}
	var total apitype.UsageRow
	total.GPUHoursByType = map[string]float64{}
	running := false
	for _, r := range rep.Rows {
		mark := ""
		if r.Running {
			mark, running = "*", true
		}
		first, second := orDash(r.User)+mark, fmt.Sprint(r.Clusters)
		if byCluster {
			first, second = r.Cluster+mark, orDash(r.User)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", first, second, hours(r.VCPUHours), hours(r.MemoryGiBHours), hours(r.GPUHours),
			gpuTypeHours(r.GPUHoursByType), usd(r.CostUSD))
		total.Clusters += r.Clusters
		total.VCPUHours += r.VCPUHours
		total.MemoryGiBHours += r.MemoryGiBHours
		total.GPUHours += r.GPUHours
		total.CostUSD += r.CostUSD
		for k, v := range r.GPUHoursByType {
			total.GPUHoursByType[k] += v
		}
	}
	if len(rep.Rows) > 1 {
		second := fmt.Sprint(total.Clusters)
		if byCluster {
			second = ""
		}
		fmt.Fprintf(tw, "TOTAL\t%s\t%s\t%s\t%s\t%s\t%s\n", second, hours(total.VCPUHours), hours(total.MemoryGiBHours), hours(total.GPUHours),
			gpuTypeHours(total.GPUHoursByType), usd(total.CostUSD))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if running {
		fmt.Fprintln(w, "\n* still running: its figures keep growing")
	}
	return nil
}

func newAdminUsageCmd(g *globals) *cobra.Command {
	var f client.UsageFilter
	cmd := &cobra.Command{
		Use:   "usage [--user U] [--since DATE] [--until DATE] [--by user|cluster] [-o table|csv|json]",
		Short: "Report vCPU-, GiB- and GPU-hours and estimated cost per user or per cluster",
		Long: `Report what clusters used between --since (default: the start of this month,
UTC) and --until (exclusive; default: now), per user or per cluster. Dates are
2026-12-01 (UTC midnight) or RFC 3339 times. -o csv and -o json print the
gateway's own report, for spreadsheets and scripts; costs are estimates.`,
		Example: `  gateway admin usage
  gateway admin usage --since 2026-11-01 --until 2026-12-01 -o csv > november.csv
  gateway admin usage --user ann --by cluster`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.By != "" && f.By != "user" && f.By != "cluster" {
				return fmt.Errorf("--by %q: use user or cluster", f.By)
			}
			format, c, err := g.formatAndConnect(cmd.Context(), "csv")
			if err != nil {
				return err
			}
			if format != "text" {
				b, err := c.AdminUsageRaw(cmd.Context(), f, format)
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(b)
				return err
			}
			rep, err := c.AdminUsage(cmd.Context(), f)
			if err != nil {
				return err
			}
			return printUsageReport(cmd.OutOrStdout(), rep)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.User, "user", "", "only this user's clusters (user name)")
	fl.StringVar(&f.Since, "since", "", "start: 2026-12-01 or an RFC 3339 time (default: start of this month, UTC)")
	fl.StringVar(&f.Until, "until", "", "end, exclusive: 2026-12-01 or an RFC 3339 time (default: now)")
	fl.StringVar(&f.By, "by", "user", "one row per user or per cluster")
	return cmd
}

// --- audit ---------------------------------------------------------------

func printAudit(w io.Writer, entries []apitype.AuditJSON) error {
	if len(entries) == 0 {
		fmt.Fprintln(w, "No audit entries")
		return nil
	}
	tw := newTabWriter(w)
	fmt.Fprintln(tw, "TIME\tACTOR\tACTION\tTARGET\tBEFORE -> AFTER")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.At.Local().Format(time.RFC3339), orDash(e.Actor), e.Action, e.Target, report.Change(e.Before, e.After))
	}
	return tw.Flush()
}

func newAdminAuditCmd(g *globals) *cobra.Command {
	var f client.AuditFilter
	cmd := &cobra.Command{
		Use:   "audit [--since DATE] [--target T] [--actor A] [--limit N]",
		Short: "Show what admins changed (quota entries, clusters stopped), newest first",
		Long: `Show the audit log, newest first: who changed which quota entry or stopped
which cluster, and the change. --target is matched exactly: a subject such as
user:ann, group:gpu or default, or cluster:NAME.`,
		Example: `  gateway admin audit --since 2026-12-01
  gateway admin audit --target user:ann
  gateway admin audit --target cluster:3f9c2a1b -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.Limit < 0 || f.Limit > 10000 {
				return fmt.Errorf("--limit must be from 1 to 10000 (0: the gateway's default)")
			}
			format, c, err := g.formatAndConnect(cmd.Context())
			if err != nil {
				return err
			}
			entries, err := c.AdminAudit(cmd.Context(), f)
			if err != nil {
				return err
			}
			if entries == nil {
				entries = []apitype.AuditJSON{}
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), entries)
			}
			return printAudit(cmd.OutOrStdout(), entries)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Since, "since", "", "only entries from then on: 2026-12-01 or an RFC 3339 time")
	fl.StringVar(&f.Target, "target", "", "only entries about this: user:ann, group:gpu, default or cluster:NAME")
	fl.StringVar(&f.Actor, "actor", "", "only changes by this admin (user name)")
	fl.IntVar(&f.Limit, "limit", 0, "at most this many entries (default: the gateway's, 1000)")
	return cmd
}
