// Command bench measures the gateway against baselines measured in the same
// run, on one machine, and prints each figure as a ratio so that the noise
// between machines cancels:
//
//	go run ./integration/bench [-quick] [-only proxy,api,...] [-out bench.json]
//	go run ./integration/bench -compare old.json new.json [again.json]
//
// Every load is bounded in count and time, and all traffic stays on
// loopback.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is one figure: the gateway's value against its baseline.
type Result struct {
	Figure   string  `json:"figure"` // e.g. "1 proxy throughput"
	Case     string  `json:"case"`   // e.g. "16 streams"
	Unit     string  `json:"unit"`
	Value    float64 `json:"value"`              // through the gateway
	Baseline float64 `json:"baseline,omitempty"` // direct, same run; 0 when the figure has none
	// Ratio is Value/Baseline, or for costs (latency, memory) what the
	// target compares; Target says which.
	Ratio  float64 `json:"ratio,omitempty"`
	Target string  `json:"target"`
	Met    bool    `json:"met"`
	Note   string  `json:"note,omitempty"`
	// Samples are the repeated measurements that Value summarises (each
	// one measured like Value, in Unit), BaselineSamples the baseline's:
	// -compare tests changes between two runs on them.
	Samples         []float64 `json:"samples,omitempty"`
	BaselineSamples []float64 `json:"baseline_samples,omitempty"`
	// Unpaired says the i-th sample and the i-th baseline sample were not
	// measured side by side, so their ratios mean nothing.
	Unpaired bool `json:"unpaired,omitempty"`
}

// Options are shared by every figure.
type Options struct {
	Quick bool   // smaller counts and shorter runs (a smoke test)
	Dir   string // a scratch directory, removed at the end
	Log   *slog.Logger
}

// figure is one section of the benchmark.
type figure struct {
	name string
	run  func(ctx context.Context, o Options) ([]Result, error)
}

func figures() []figure {
	return []figure{
		{"proxy", benchProxy},
		{"latency", benchLatency},
		{"conns", benchConns},
		{"dashboard", benchDashboard},
		{"api", benchAPI},
		{"ready", benchReady},
		{"controlplane", benchControlPlane},
		{"envbuild", benchEnvBuild},
		{"console", benchConsole},
	}
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case childFlag:
			os.Exit(runChild(os.Args[2:]))
		case backendFlag:
			os.Exit(runBackend(os.Args[2:]))
		case countsFlag:
			os.Exit(cpCountsChild())
		}
	}
	quick := flag.Bool("quick", false, "smaller counts and shorter runs")
	only := flag.String("only", "", "comma-separated figures to run ("+strings.Join(names(), ", ")+"); default all")
	out := flag.String("out", "bench.json", "where to write the results as JSON (empty: nowhere)")
	verbose := flag.Bool("v", false, "log progress")
	compare := flag.Bool("compare", false, "compare two runs' JSON instead of measuring: -compare old.json new.json [again.json], again.json a second run of the old build (the A/A band)")
	flag.Parse()
	if *compare {
		if flag.NArg() != 2 && flag.NArg() != 3 {
			fmt.Fprintln(os.Stderr, "bench: -compare wants two or three files: go run ./integration/bench -compare old.json new.json [again.json]")
			os.Exit(2)
		}
		if err := compareFiles(flag.Arg(0), flag.Arg(1), flag.Arg(2), os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*quick, *only, *out, *verbose, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func names() []string {
	var out []string
	for _, f := range figures() {
		out = append(out, f.name)
	}
	return out
}

func run(quick bool, only, out string, verbose bool, w io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	dir, err := os.MkdirTemp("", "gateway-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	selected := figures()
	if only != "" {
		want := strings.Split(only, ",")
		for _, n := range want {
			if !slices.Contains(names(), n) {
				return fmt.Errorf("-only: no figure %q (there are %s)", n, strings.Join(names(), ", "))
			}
		}
		selected = slices.DeleteFunc(selected, func(f figure) bool { return !slices.Contains(want, f.name) })
	}
	start := time.Now()
	var all []Result
	var failed []string
	for _, f := range selected {
		log.Info("running", "figure", f.name)
		t0 := time.Now()
		rs, err := f.run(ctx, Options{Quick: quick, Dir: dir, Log: log})
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", f.name, err))
			fmt.Fprintf(os.Stderr, "bench: %s failed: %v\n", f.name, err)
		}
		log.Info("done", "figure", f.name, "took", time.Since(t0).Round(time.Millisecond))
		all = append(all, rs...)
		if ctx.Err() != nil {
			break
		}
	}
	printTable(w, all)
	fmt.Fprintf(w, "\n%d figures, %d targets met, %d missed, in %s\n", len(all), count(all, true), count(all, false), time.Since(start).Round(time.Second))
	if out != "" {
		b, _ := json.MarshalIndent(map[string]any{"date": time.Now().UTC().Format(time.RFC3339), "quick": quick, "results": all, "errors": failed}, "", "  ")
		if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(w, "written to %s\n", out)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d figure(s) could not be measured: %s", len(failed), strings.Join(failed, "; "))
	}
	return nil
}

func count(rs []Result, met bool) int {
	n := 0
	for _, r := range rs {
		if r.Met == met {
			n++
		}
	}
	return n
}

func printTable(w io.Writer, rs []Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FIGURE\tCASE\tGATEWAY\tBASELINE\tRATIO\tTARGET\tMET")
	for _, r := range rs {
		base, ratio := "-", "-"
		if r.Baseline != 0 {
			base = fmt.Sprintf("%s %s", human(r.Baseline), r.Unit)
		}
		if r.Ratio != 0 {
			ratio = fmt.Sprintf("%.3f", r.Ratio)
		}
		met := "yes"
		if !r.Met {
			met = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%s\t%s\t%s\n", r.Figure, r.Case, human(r.Value), r.Unit, base, ratio, r.Target, met)
	}
	tw.Flush()
	for _, r := range rs {
		if r.Note != "" {
			fmt.Fprintf(w, "  %s / %s: %s\n", r.Figure, r.Case, r.Note)
		}
	}
}

// human prints a number with 3-4 significant digits.
func human(v float64) string {
	switch a := max(v, -v); {
	case a >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// percentile is the p-quantile (0 < p <= 1) of d, nearest rank.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// humanSize prints a size in B, KiB or MiB, whole when it is.
func humanSize(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size {
			if n%u.size == 0 {
				return fmt.Sprintf("%d %s", n/u.size, u.name)
			}
			return fmt.Sprintf("%.1f %s", float64(n)/float64(u.size), u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}
