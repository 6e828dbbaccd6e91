package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/client"
	"github.com/gatewayhq/gateway/clusteropts"
)

// connectInfo is what a user needs to reach a running cluster.
type connectInfo struct {
	Name             string `json:"name"`
	Status           string `json:"status"`
	Phase            string `json:"phase"`
	Workers          int    `json:"workers"`
	SchedulerAddress string `json:"scheduler_address"`
	ServerName       string `json:"tls_server_name"`
	GatewayAddress   string `json:"gateway_address"`
	DashboardURL     string `json:"dashboard_url"`
	TLSCertFile      string `json:"tls_cert_file"`
	TLSKeyFile       string `json:"tls_key_file"`
	// DaskGateway is the dask_gateway snippet (Gateway() with no
	// arguments, configured by gateway login); Python the one with
	// distributed alone.
	DaskGateway string `json:"dask_gateway_python"`
	// DaskConfigNote says what makes Gateway() reach this gateway.
	DaskConfigNote string `json:"dask_config_note,omitempty"`
	Python         string `json:"python"`
	// DashboardProblem is the gateway's one line on why dashboards cannot
	// work (and how to fix it), if it knows of one.
	DashboardProblem string `json:"dashboard_problem,omitempty"`
}

func pythonSnippet(addr, serverName, cert, key string) string {
	// distributed's TLS connector takes the server name only from the
	// connection arguments, so a small Security subclass adds it; this works
	// with every distributed version, unlike extra_conn_args.
	return fmt.Sprintf(`from distributed import Client
from distributed.security import Security

class GatewaySecurity(Security):
    def get_connection_args(self, role):
        args = super().get_connection_args(role)
        args["server_hostname"] = %[2]q  # the gateway routes by TLS server name
        return args

security = GatewaySecurity(
    tls_ca_file=%[3]q,
    tls_client_cert=%[3]q,
    tls_client_key=%[4]q,
    require_encryption=True,
)
client = Client(%[1]q, security=security)
`, addr, serverName, cert, key)
}

// daskGatewaySnippet connects to a cluster by name with dask_gateway,
// configured by the dask configuration gateway login writes: its owner's
// and anyone's it is shared with.
func daskGatewaySnippet(name string) string {
	return fmt.Sprintf("from dask_gateway import Gateway\nclient = Gateway().connect(%q).get_client()\n", name)
}

// connection writes the cluster's credentials to the CLI's directory and
// returns how to connect; gateway is the gateway's URL.
func connection(d *apitype.ClusterDetail, gateway string) (connectInfo, error) {
	ci := connectInfo{Name: d.Name, Status: d.State, Phase: d.Phase, Workers: d.Workers.Ready,
		SchedulerAddress: d.SchedulerAddress, ServerName: d.ServerName, GatewayAddress: d.GatewayAddress, DashboardURL: d.DashboardURL,
		DashboardProblem: d.DashboardProblem, DaskGateway: daskGatewaySnippet(d.Name), DaskConfigNote: daskConfigNote(gateway)}
	if d.TLSCert == nil || d.TLSKey == nil {
		return ci, nil
	}
	cert, key, err := client.SaveClusterTLS(d.Name, *d.TLSCert, *d.TLSKey)
	if err != nil {
		return ci, fmt.Errorf("save the cluster's TLS credentials: %w", err)
	}
	ci.TLSCertFile, ci.TLSKeyFile = cert, key
	ci.Python = pythonSnippet(d.SchedulerAddress, d.ServerName, cert, key)
	return ci, nil
}

func printConnection(w io.Writer, ci connectInfo) {
	fmt.Fprintf(w, "  Cluster:            %s\n", ci.Name)
	fmt.Fprintf(w, "  Scheduler address:  %s  (TLS server name %s)\n", ci.SchedulerAddress, ci.ServerName)
	fmt.Fprintf(w, "  dask_gateway:       %s\n", ci.GatewayAddress)
	fmt.Fprintf(w, "  Dashboard:          %s\n                      (in a browser: %s dashboard %s)\n", ci.DashboardURL, cliName(), ci.Name)
	if ci.DashboardProblem != "" {
		fmt.Fprintf(w, "                      NOTE: %s\n", ci.DashboardProblem)
	}
	fmt.Fprintf(w, "  TLS credentials:    %s, %s\n", ci.TLSCertFile, ci.TLSKeyFile)
	fmt.Fprintf(w, "\nConnect from Python with dask_gateway:\n\n%s", ci.DaskGateway)
	if ci.DaskConfigNote != "" {
		fmt.Fprintf(w, "\n(%s)\n", ci.DaskConfigNote)
	}
	fmt.Fprintf(w, "\nor with distributed alone:\n\n%s", ci.Python)
}

// parseMemory reads sizes like 2GiB, 512MiB, 1.5G or a plain number of GiB.
func parseMemory(s string) (float64, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	units := []struct {
		suffix string
		gib    float64
	}{{"gib", 1}, {"gb", 1e9 / (1 << 30)}, {"g", 1}, {"mib", 1.0 / 1024}, {"mb", 1e6 / (1 << 30)}, {"m", 1.0 / 1024}, {"tib", 1024}, {"t", 1024}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(t, u.suffix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil || f <= 0 {
				break
			}
			return f * u.gib, nil
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("--worker-memory %q: use a size such as 2GiB or 512MiB", s)
	}
	return f, nil
}

func newNewClusterCmd(g *globals) *cobra.Command {
	var workers, threads, cpus, gpus int
	var memory, gpuType, workerType, schedType string
	var spot bool
	var noWait bool
	var timeout, idle time.Duration
	var sw softwareFlags
	var shareWith, shareAllow []string
	var daskConfig, envVars []string
	cmd := &cobra.Command{
		Use:   "new-cluster",
		Short: "Start a Dask cluster and print how to connect to it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			if workers < 0 {
				return fmt.Errorf("--workers must not be negative")
			}
			// Options left zero are left to the gateway's defaults; the
			// machine options go only when set: backends without instance
			// types do not know them, and say so.
			opts := clusteropts.Request{Options: clusteropts.Options{Workers: workers,
				WorkerCPUs: cpus, WorkerGPUs: gpus, GPUType: gpuType, WorkerVMType: workerType, SchedulerVMType: schedType, Spot: spot},
				Set: []string{clusteropts.FieldWorkers}}
			if cmd.Flags().Changed("worker-threads") {
				if threads < 1 {
					return fmt.Errorf("--worker-threads must be at least 1")
				}
				opts.WorkerThreads = threads
			}
			if cmd.Flags().Changed("idle-timeout") {
				if idle < 0 {
					return fmt.Errorf("--idle-timeout must not be negative (0: never)")
				}
				opts.IdleTimeout = int(idle.Round(time.Second) / time.Second)
				opts.Set = append(opts.Set, clusteropts.FieldIdleTimeout) // 0 is never, not the default
			}
			if memory != "" {
				gib, err := parseMemory(memory)
				if err != nil {
					return err
				}
				opts.WorkerMemory = gib
			}
			if opts.Environ, _, err = configEnviron("--dask-config", "--env-var", daskConfig, envVars); err != nil {
				return err
			}
			ctx := cmd.Context()
			start := time.Now()
			progress := cmd.ErrOrStderr()
			if g.json() {
				progress = io.Discard
			}
			if err := sw.options(ctx, cmd, c, progress, &opts.Options); err != nil {
				return err
			}
			var share *apitype.ShareRequest
			if len(shareWith) > 0 {
				share = &apitype.ShareRequest{With: shareWith, Allow: shareAllow}
			} else if len(shareAllow) > 0 {
				return fmt.Errorf("--share-allow says what the people of --share may do: name them with --share group:NAME")
			}
			name, err := c.CreateShared(ctx, opts, share)
			if err != nil {
				return err
			}
			fmt.Fprintf(progress, "Cluster %s requested\n", name)
			if share != nil {
				fmt.Fprintf(progress, "Shared with %s\n", strings.Join(shareWith, ", "))
			}
			if noWait {
				if g.json() {
					return printJSON(cmd.OutOrStdout(), map[string]string{"name": name})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s\n", name)
				return nil
			}
			return awaitCluster(ctx, c, name, workers, timeout, start, progress, cmd.OutOrStdout(), g.json())
		},
	}
	f := cmd.Flags()
	f.IntVarP(&workers, "workers", "n", 0, "workers to start with")
	f.IntVar(&threads, "worker-threads", 1, "threads per worker")
	f.StringVar(&memory, "worker-memory", "", "memory per worker, e.g. 2GiB (default: the gateway's)")
	f.IntVar(&cpus, "worker-cpus", 0, "vCPUs per worker (cloud backends; the cheapest allowed type that fits is chosen)")
	f.IntVar(&gpus, "worker-gpus", 0, "GPUs per worker (cloud backends)")
	f.StringVar(&gpuType, "gpu-type", "", "GPU model: t4, a10g, l4, v100, a100, a100-80gb, h100 (cloud backends)")
	f.StringVar(&workerType, "worker-vm-type", "", "worker instance type by name, e.g. g5.xlarge (see gateway instance-types)")
	f.StringVar(&schedType, "scheduler-vm-type", "", "scheduler instance type by name")
	f.BoolVar(&spot, "spot", false, "workers on spot capacity, on-demand when there is none (cloud backends)")
	f.BoolVar(&noWait, "no-wait", false, "print the name and return at once")
	f.DurationVar(&idle, "idle-timeout", 0, "stop the cluster after this long with no tasks and no clients, e.g. 20m (0: never; default: the gateway's)")
	f.StringArrayVar(&daskConfig, "dask-config", nil, "a Dask config value of the scheduler and workers, key=value (e.g. distributed.worker.memory.target=0.1; passed as DASK_ variables); repeat for more")
	f.StringArrayVar(&envVars, "env-var", nil, "an environment variable of the scheduler and workers, NAME=value; repeat for more")
	f.DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the cluster and its workers")
	f.StringSliceVar(&shareWith, "share", nil, "share the cluster with user:NAME or group:NAME (see gateway share)")
	f.StringSliceVar(&shareAllow, "share-allow", nil, "what they may do beyond viewing and connecting: scale, stop")
	sw.add(f, true)
	return cmd
}

// awaitCluster waits for a cluster just requested to run with its workers,
// then prints how to connect to it (as JSON when asJSON).
func awaitCluster(ctx context.Context, c *client.Client, name string, workers int, timeout time.Duration, start time.Time, progress, out io.Writer, asJSON bool) error {
	d, err := waitReady(ctx, c, name, workers, timeout, progress, start)
	if err != nil {
		return err
	}
	ci, err := connection(d, c.BaseURL())
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(out, ci)
	}
	fmt.Fprintf(out, "\nCluster %s is running with %s (%.1fs)\n\n", name, workerCount(d.Workers.Ready), time.Since(start).Seconds())
	printConnection(out, ci)
	return nil
}

// waitReady polls the cluster until it runs with the wanted workers,
// printing each phase as it changes.
func waitReady(ctx context.Context, c *client.Client, name string, workers int, timeout time.Duration, progress io.Writer, start time.Time) (*apitype.ClusterDetail, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		d, err := c.Get(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				return nil, waitErr(ctx, name, timeout)
			}
			return nil, err
		}
		phase := d.Phase
		if d.State == "PENDING" && phase == "" {
			phase = "queued"
		}
		if phase != last {
			fmt.Fprintf(progress, "[%5.1fs] %s\n", time.Since(start).Seconds(), phase)
			last = phase
		}
		switch d.State {
		case "RUNNING":
			if d.Workers.Ready >= workers {
				return d, nil
			}
		case "FAILED":
			return nil, fmt.Errorf("cluster %s failed: %s\n(more: gateway logs %s)", name, d.Reason, name)
		case "STOPPING", "STOPPED":
			return nil, fmt.Errorf("cluster %s was stopped while starting: %s", name, d.Reason)
		}
		select {
		case <-ctx.Done():
			return nil, waitErr(ctx, name, timeout)
		case <-tick.C:
		}
	}
}

func waitErr(ctx context.Context, name string, timeout time.Duration) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("cluster %s was not ready within %s; it keeps starting: follow it with `gateway show %s`, or stop it with `gateway stop %s`", name, timeout, name, name)
	}
	return fmt.Errorf("stopped waiting; cluster %s keeps starting: stop it with `gateway stop %s`", name, name)
}

func age(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

func newListCmd(g *globals) *cobra.Command {
	var all bool
	var status []string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List your clusters and those shared with you (active ones unless --all or --status)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			if all {
				status = []string{"all"}
			}
			m, err := c.List(cmd.Context(), status)
			if err != nil {
				return err
			}
			list := make([]apitype.ClusterDetail, 0, len(m))
			for _, d := range m {
				list = append(list, d)
			}
			sort.Slice(list, func(i, j int) bool { return list[i].CreatedAt.After(list[j].CreatedAt) })
			if g.json() {
				return printJSON(cmd.OutOrStdout(), list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSTATUS\tWORKERS\tAGE\tPHASE\tOWNER\tDASHBOARD")
			for _, d := range list {
				fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\n", d.Name, d.State, d.Workers.Ready, d.Workers.Requested,
					age(d.CreatedAt), d.Phase, ownerColumn(d), orDash(d.DashboardURL))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVarP(&all, "all", "a", false, "include stopped and failed clusters")
	cmd.Flags().StringSliceVar(&status, "status", nil, "only these statuses (PENDING, RUNNING, STOPPING, STOPPED, FAILED)")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Show a cluster: status, workers, how to connect, and why it failed if it did",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			d, err := c.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			ci, err := connection(d, c.BaseURL())
			if err != nil {
				return err
			}
			evs, err := c.Events(cmd.Context(), d.Name)
			if err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), map[string]any{"cluster": d, "connection": ci, "events": evs})
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Name:      %s\nStatus:    %s (%s)\nOwner:     %s\nProvider:  %s\nWorkers:   %d ready of %d requested\nCreated:   %s (%s ago)\n",
				d.Name, d.State, d.Phase, d.Owner, d.Provider, d.Workers.Ready, d.Workers.Requested,
				d.CreatedAt.Local().Format(time.RFC3339), age(d.CreatedAt))
			printAccess(w, d)
			if d.StoppedAt != nil {
				fmt.Fprintf(w, "Ended:     %s\n", d.StoppedAt.Local().Format(time.RFC3339))
			}
			if d.Reason != "" {
				fmt.Fprintf(w, "Reason:    %s\n", indent(d.Reason))
			}
			if d.State == "RUNNING" {
				fmt.Fprintln(w)
				printConnection(w, ci)
			}
			if len(evs) > 0 {
				fmt.Fprintf(w, "\nEvents:\n")
				for _, e := range evs {
					fmt.Fprintf(w, "  %s  %-14s %s\n", e.Time.Local().Format("15:04:05.000"), e.Kind, indent(firstLines(e.Message, 1)))
				}
			}
			return nil
		},
	}
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n           ") }

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		return strings.Join(lines[:n], "\n") + " ..."
	}
	return s
}

func newScaleCmd(g *globals) *cobra.Command {
	var workers int
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "scale NAME --workers N",
		Short: "Set the number of workers of a cluster",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("workers") {
				return fmt.Errorf("say how many workers: gateway scale %s --workers N", args[0])
			}
			if workers < 0 {
				return fmt.Errorf("--workers must not be negative")
			}
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			msg, err := c.Scale(cmd.Context(), args[0], workers)
			if err != nil {
				return err
			}
			if msg != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", msg)
			}
			if !wait {
				if msg != "" { // clamped: say to what
					if d, err := c.Get(cmd.Context(), args[0]); err == nil {
						workers = d.Workers.Requested
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Cluster %s scaling to %s\n", args[0], workerCount(workers))
				return nil
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			for {
				d, err := c.Get(ctx, args[0])
				if err != nil {
					return err
				}
				if d.State == "FAILED" {
					return fmt.Errorf("cluster %s failed: %s", d.Name, d.Reason)
				}
				if d.Workers.Ready == d.Workers.Requested {
					fmt.Fprintf(cmd.OutOrStdout(), "Cluster %s has %s\n", d.Name, workerCount(d.Workers.Ready))
					return nil
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("cluster %s has %d of %d workers after %s", d.Name, d.Workers.Ready, d.Workers.Requested, timeout)
				case <-time.After(200 * time.Millisecond):
				}
			}
		},
	}
	cmd.Flags().IntVarP(&workers, "workers", "n", 0, "number of workers")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until that many workers are connected")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long --wait waits")
	return cmd
}

func newStopCmd(g *globals) *cobra.Command {
	var all, wait bool
	cmd := &cobra.Command{
		Use:   "stop NAME... | --all",
		Short: "Stop clusters",
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return fmt.Errorf("name the clusters to stop, or pass --all (not both)")
			}
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if all {
				m, err := c.List(ctx, nil)
				if err != nil {
					return err
				}
				for n, d := range m {
					if d.Access == nil { // yours: not those shared with you
						args = append(args, n)
					}
				}
				sort.Strings(args)
				if len(args) == 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "No active clusters")
					return nil
				}
			} else {
				// Unknown names are an error for a person, though the API
				// (like dask-gateway's) treats stopping them as done.
				for _, n := range args {
					if _, err := c.Get(ctx, n); err != nil {
						return err
					}
				}
			}
			for _, n := range args {
				if err := c.Stop(ctx, n); err != nil {
					return err
				}
			}
			if wait {
				for _, n := range args {
					for {
						d, err := c.Get(ctx, n)
						if err != nil {
							return err
						}
						if d.State == "STOPPED" || d.State == "FAILED" {
							break
						}
						select {
						case <-ctx.Done():
							return ctx.Err()
						case <-time.After(100 * time.Millisecond):
						}
					}
					client.RemoveClusterTLS(n)
				}
			}
			for _, n := range args {
				verb := "stopping"
				if wait {
					verb = "stopped"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Cluster %s %s\n", n, verb)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "stop all your active clusters")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until they have stopped")
	return cmd
}

func newLogsCmd(g *globals) *cobra.Command {
	var tail int
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print the scheduler's and workers' logs of a cluster",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tail < 0 {
				return fmt.Errorf("--tail must not be negative")
			}
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			s, err := c.Logs(cmd.Context(), args[0], tail)
			if err != nil {
				return err
			}
			if g.json() {
				type line struct {
					Member string `json:"member"`
					Line   string `json:"line"`
				}
				lines := []line{}
				for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
					if member, text, ok := strings.Cut(strings.TrimPrefix(l, "["), "] "); ok && strings.HasPrefix(l, "[") {
						lines = append(lines, line{member, text})
					}
				}
				return printJSON(cmd.OutOrStdout(), lines)
			}
			_, err = io.WriteString(cmd.OutOrStdout(), s)
			return err
		},
	}
	cmd.Flags().IntVar(&tail, "tail", 0, "only the last N lines of each member (0: all)")
	return cmd
}

func newPrintTokenCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "print-token",
		Short: "Print the bearer token the CLI sends, renewed if needed (curl -H \"Authorization: Bearer $(gateway print-token)\")",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := g.session(cmd.Context())
			if err != nil {
				return err
			}
			if s.token == "" {
				return fmt.Errorf("not logged in to %s: run: gateway login", s.url)
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.token)
			return nil
		},
	}
}
