package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/bench"
	"github.com/gatewayhq/gateway/bench/report"
	"github.com/gatewayhq/gateway/client"
)

// addBenchResultsCmds adds gateway bench history, report and check.
func addBenchResultsCmds(cmd *cobra.Command, g *globals) {
	cmd.AddCommand(newBenchHistoryCmd(g), newBenchReportCmd(g), newBenchCheckCmd(g))
}

func newBenchHistoryCmd(g *globals) *cobra.Command {
	var env, since, owner string
	var limit int
	c := &cobra.Command{
		Use:   "history TEST [--env E] [--since 30d] [-o text|json|csv]",
		Short: "Every recorded sample of a benchmark, oldest first",
		Long: `Every recorded sample of a benchmark (by its test id, as gateway bench
report shows it, or by a unique end of it: bench_shuffle for
bench_io.py::bench_shuffle), oldest first, with the run, the environment,
the repeat (from 1), the wall time and the metrics read from the scheduler.
--env keeps one environment, by name or hash (or a prefix of at least 8 hex
digits of it). You see your own results; admins see everyone's (--owner to
pick one user).

  gateway bench history bench_shuffle --env nightly -o csv > shuffle.csv`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, c, err := g.formatAndConnect(cmd.Context(), "csv")
			if err != nil {
				return err
			}
			test, err := resolveTestName(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			q := client.BenchHistoryQuery{Owner: owner, Test: test, Env: env, Limit: limit}
			if since != "" {
				d, err := bench.ParseWindow(since)
				if err != nil {
					return fmt.Errorf("--since: %w", err)
				}
				q.Since = time.Now().Add(-d)
			}
			pts, err := c.BenchHistory(cmd.Context(), q)
			if err != nil {
				return err
			}
			switch format {
			case "json":
				return printJSON(cmd.OutOrStdout(), pts)
			case "csv":
				return writeHistoryCSV(cmd.OutOrStdout(), pts)
			}
			if len(pts) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no samples of %s%s (names are as gateway bench report shows them)\n", test, onEnv(env))
				return nil
			}
			tw := newTabWriter(cmd.OutOrStdout())
			fmt.Fprintln(tw, "STARTED\tRUN\tENV\tREPEAT\tSTATUS\tWALL\tPEAK MEM\tSPILLED\tSENT\tCPU")
			for _, p := range pts {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%.1fs\n", p.RunStartedAt.Local().Format("2006-01-02 15:04"), p.RunID,
					envLabel(p), p.Repeat+1, p.Status, report.Seconds(p.WallSeconds), report.Bytes(p.PeakManaged+p.PeakUnmanaged), report.Bytes(p.Spilled),
					report.Bytes(p.Transferred), p.CPUSeconds)
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&env, "env", "", "only this environment (name, hash or hash prefix)")
	c.Flags().StringVar(&since, "since", "", "only samples this recent (e.g. 30d, 2w, 12h)")
	c.Flags().StringVar(&owner, "owner", "", "admins: only this user's results")
	c.Flags().IntVar(&limit, "limit", 0, "at most this many (the newest); default 10000")
	return c
}

// testRuns is how many of the caller's newest runs a short test name is
// looked up in.
const testRuns = 1000

// resolveTestName turns a short name into the test id it ends (after a
// "::" or "/"): bench_sum for bench_array.py::bench_sum. A full id, or a
// name that ends none, is returned as given; a name that ends several is
// an error listing them.
func resolveTestName(ctx context.Context, c *client.Client, name string) (string, error) {
	runs, err := c.BenchRuns(ctx, "", testRuns)
	if err != nil {
		return "", err
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.Tests...)
	}
	return matchTestName(name, ids)
}

// matchTestName picks the one id of ids that is name or ends with it
// after a "::" or "/" boundary.
func matchTestName(name string, ids []string) (string, error) {
	seen := map[string]bool{}
	var found []string
	for _, id := range ids {
		if id == name {
			return name, nil
		}
		if !seen[id] && (strings.HasSuffix(id, "::"+name) || strings.HasSuffix(id, "/"+name)) {
			found = append(found, id)
		}
		seen[id] = true
	}
	switch len(found) {
	case 0:
		return name, nil
	case 1:
		return found[0], nil
	}
	sort.Strings(found)
	return "", fmt.Errorf("%s names %d benchmarks: %s; give one of them in full", name, len(found), strings.Join(found, ", "))
}

func onEnv(env string) string {
	if env == "" {
		return ""
	}
	return " on " + env
}

func envLabel(p apitype.BenchPointJSON) string {
	name := p.EnvName
	if name == "" && len(p.EnvHash) >= 12 {
		name = p.EnvHash[:12]
	}
	return name + " (" + p.Env + ")"
}

func writeHistoryCSV(w io.Writer, pts []apitype.BenchPointJSON) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"run_started_at", "run_id", "owner", "suite", "test", "env", "env_name", "env_hash", "repeat", "status",
		"wall_seconds", "peak_managed", "peak_unmanaged", "avg_managed", "avg_unmanaged", "spilled", "transferred", "cpu_seconds", "at", "error"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, p := range pts {
		_ = cw.Write([]string{p.RunStartedAt.UTC().Format(time.RFC3339), p.RunID, p.Owner, p.Suite, p.Test, p.Env, p.EnvName, p.EnvHash,
			strconv.Itoa(p.Repeat + 1), p.Status, f(p.WallSeconds), i(p.PeakManaged), i(p.PeakUnmanaged), i(p.AvgManaged), i(p.AvgUnmanaged),
			i(p.Spilled), i(p.Transferred), f(p.CPUSeconds), p.At.UTC().Format(time.RFC3339), p.Error})
	}
	cw.Flush()
	return cw.Error()
}

func printReport(w io.Writer, rep report.Report) error {
	r := rep.Run
	fmt.Fprintf(w, "Run %s: suite %s, %s", r.ID, r.Suite, r.Status)
	if r.Error != "" {
		fmt.Fprintf(w, " (%s)", report.Shorten(r.Error, 200))
	}
	fmt.Fprintf(w, ", started %s\n", r.StartedAt.Local().Format("2006-01-02 15:04"))
	for _, e := range r.Envs {
		hash := e.Hash
		if len(hash) > 12 {
			hash = hash[:12]
		}
		fmt.Fprintf(w, "  %-2s %s %s %s\n", e.Label, e.Name, hash, report.Packages(e.Packages))
	}
	where := strings.TrimSpace(r.Provider + " " + r.Region)
	if where == "" {
		where = "an unrecorded backend"
	}
	fmt.Fprintf(w, "  on %s, %s; gateway %s\n", where, string(r.Shape), r.GatewayVersion)
	if len(rep.Tests) == 0 {
		fmt.Fprintln(w, "no samples recorded")
		return nil
	}
	fmt.Fprintln(w)
	tw := newTabWriter(w)
	fmt.Fprintf(tw, "TEST\tA median (IQR, n)\t%s median (IQR, n)\tCHANGE\t95%% INTERVAL\tP\tA/A BAND\tVERDICT\tFAILED\n", benchDash(rep.Candidate))
	for _, t := range rep.Tests {
		interval := "–"
		if t.Lo != nil && t.Hi != nil {
			interval = fmt.Sprintf("[%s, %s]", report.Pct(t.Lo), report.Pct(t.Hi))
		}
		band := "–"
		if t.Noise != nil {
			band = report.Band(t.Noise)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", t.Test, report.Summary(t.A), report.Summary(t.B), report.Pct(t.Change), interval, report.PValue(t.P), band,
			benchDash(t.Verdict), t.Failed)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range rep.Tests {
		for _, e := range t.Errors {
			fmt.Fprintf(w, "  %s: %s\n", t.Test, e.String())
		}
	}
	fmt.Fprintf(w, "\nThreshold %.0f%%. %s\n", rep.Threshold*100, report.Rule)
	return nil
}

func benchDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func newBenchReportCmd(g *globals) *cobra.Command {
	var htmlFile, threshold string
	c := &cobra.Command{
		Use:   "report RUN [--html FILE] [--threshold 10%] [-o text|json]",
		Short: "Compare a run's environments test by test, with statistics and a verdict",
		Long: `Compare a run's environments test by test: A's and B's median, quartiles and
count of the wall time of successful samples, the relative change of
medians (B/A − 1), a Mann–Whitney U p-value, a bootstrap 95 % interval of the
change, the A/A noise band when the run measured one (--null), and a verdict.

` + report.Rule + `

--html FILE also writes one self-contained HTML file (no network needed to
view it) with a box plot of every set's samples per test and each test's
history, one line per set, dated.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, c, err := g.formatAndConnect(cmd.Context())
			if err != nil {
				return err
			}
			th := report.DefaultThreshold
			if threshold != "" {
				if th, err = bench.ParseThreshold(threshold); err != nil {
					return fmt.Errorf("--threshold: %w", err)
				}
			}
			run, err := c.BenchRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			rep := report.Build(run, th)
			if htmlFile != "" {
				hist := map[string][]apitype.BenchPointJSON{}
				for _, t := range rep.Tests {
					pts, err := c.BenchHistory(cmd.Context(), client.BenchHistoryQuery{Owner: run.Owner, Test: t.Test, Limit: 5000})
					if err != nil {
						return fmt.Errorf("history of %s: %w", t.Test, err)
					}
					hist[t.Test] = pts
				}
				if err := writeHTMLReport(htmlFile, rep, hist); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", htmlFile)
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), rep)
			}
			return printReport(cmd.OutOrStdout(), rep)
		},
	}
	c.Flags().StringVar(&htmlFile, "html", "", "also write a self-contained HTML report to this file")
	c.Flags().StringVar(&threshold, "threshold", "", "smallest relative change that counts (default 10%)")
	return c
}

// errRegressions is what bench check returns when it found any, so that
// it exits non-zero.
var errRegressions = errors.New("regressions found")

func newBenchCheckCmd(g *globals) *cobra.Command {
	var env, window, threshold, owner string
	c := &cobra.Command{
		Use:   "check --env E [--window 7d] [--threshold 10%]",
		Short: "Flag benchmarks whose latest run is slower than the runs before it; exits 1 if any",
		Long: `Compare each benchmark's latest run on an environment with the runs of the
same environment that started within --window before it. Runs are compared,
not samples: each run is one observation (its median wall time), because
samples of one run share its host, cache and neighbours, and runs drift. The
spread between runs comes from the earlier runs' medians (3 runs or more), else
from the within-run A/A of runs made with --null; the report says which. A
benchmark regressed when its latest median is at least --threshold above the
earlier runs' (their geometric mean) and a one-sided t-test of the latest run
against them gives p < 0.05. Benchmarks whose spread cannot be estimated are
listed but not judged.

The command exits 1 and lists the regressions, with p-value and size, when
there are any, so that cron or CI can act on it:

  gateway bench check --env nightly --window 7d --threshold 10% || notify-team`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if env == "" {
				return errors.New("--env is required: the environment (name or hash) whose history to check")
			}
			format, c, err := g.formatAndConnect(cmd.Context())
			if err != nil {
				return err
			}
			// Checked here too, so that a bad value is named by its flag.
			if _, err := bench.ParseWindow(window); err != nil {
				return fmt.Errorf("--window: %w", err)
			}
			if _, err := bench.ParseThreshold(threshold); err != nil {
				return fmt.Errorf("--threshold: %w", err)
			}
			res, err := c.BenchCheckAs(cmd.Context(), owner, env, window, threshold)
			if err != nil {
				return err
			}
			if format == "json" {
				if err := printJSON(cmd.OutOrStdout(), res); err != nil {
					return err
				}
			} else if err := printCheck(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			if res.Regressions == 0 {
				return nil
			}
			var list []string
			for _, f := range res.Findings {
				if f.Regressed {
					list = append(list, fmt.Sprintf("%s %s (p=%s)", f.Test, report.Pct(f.Change), report.PValue(f.P)))
				}
			}
			return fmt.Errorf("%w on %s: %s", errRegressions, env, strings.Join(list, "; "))
		},
	}
	c.Flags().StringVar(&env, "env", "", "the environment to check (name, hash or hash prefix)")
	c.Flags().StringVar(&window, "window", "7d", "how far back the baseline reaches from the latest run (e.g. 7d, 2w, 36h)")
	c.Flags().StringVar(&threshold, "threshold", "10%", "smallest slowdown that counts (e.g. 10%)")
	c.Flags().StringVar(&owner, "owner", "", "admins: check this user's results")
	return c
}

func printCheck(w io.Writer, res apitype.BenchCheckJSON) error {
	if len(res.Findings) == 0 {
		fmt.Fprintf(w, "no results on %s to check\n", res.Env)
		return nil
	}
	tw := newTabWriter(w)
	fmt.Fprintln(tw, "SUITE\tTEST\tLATEST RUN\tBASELINE\tLATEST\tCHANGE\tP\tRESULT")
	methods := map[string]bool{}
	var texts []string
	for _, f := range res.Findings {
		result := "ok"
		switch {
		case f.Regressed:
			result = "REGRESSION"
		case f.Note != "":
			result = "not checked: " + f.Note
		}
		if f.MethodText != "" && !methods[f.Method] {
			methods[f.Method] = true
			texts = append(texts, f.Test+": "+f.MethodText)
		}
		base := "–"
		if f.BaselineMedian != nil {
			base = report.Seconds(*f.BaselineMedian)
		}
		latest := "–"
		if f.LatestMedian != nil {
			latest = report.Seconds(*f.LatestMedian)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s (%d runs, n=%d)\t%s (n=%d)\t%s\t%s\t%s\n", f.Suite, f.Test, f.Run, base, f.BaselineRuns, f.Baseline, latest, f.Latest,
			report.Pct(f.Change), report.PValue(f.P), result)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d regression(s) on %s: window %s, threshold %.0f%%, p < %.2f\n", res.Regressions, res.Env, res.Window, res.Threshold*100, res.Alpha)
	if len(texts) > 0 {
		// One example per method: the spreads differ by test.
		fmt.Fprintln(w, "Method (runs are compared, not samples):")
		for _, t := range texts {
			fmt.Fprintln(w, "  "+t)
		}
	}
	return nil
}
