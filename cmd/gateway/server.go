package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"golang.org/x/oauth2"
	"gopkg.in/yaml.v3"

	"github.com/gatewayhq/gateway/client"
	"github.com/gatewayhq/gateway/clusteropts"
	"github.com/gatewayhq/gateway/internal/config"
	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/server"
)

// serverFlags binds the server flags to their configuration keys.
type serverFlags struct {
	configFile string
	schema     *config.Schema
	v          *viper.Viper
}

func addServerFlags(fs *pflag.FlagSet) *serverFlags {
	schema := server.ConfigSchema()
	sf := &serverFlags{schema: schema, v: schema.New()}
	fs.StringVar(&sf.configFile, "config", "", "YAML configuration file (env GATEWAY_CONFIG)")
	fs.String("listen", "", "public address, host:port (key listen)")
	fs.String("data-dir", "", "data directory (key data_dir)")
	fs.String("provider", "", "backend for new clusters (key provider)")
	fs.String("log-level", "", "debug, info, warn or error (key log.level)")
	fs.String("log-file", "", "append the logs to this file instead of standard error (key log.file; - : standard error)")
	for flag, key := range map[string]string{"listen": "listen", "data-dir": "data_dir", "provider": "provider", "log-level": "log.level", "log-file": "log.file"} {
		_ = sf.v.BindPFlag(key, fs.Lookup(flag))
	}
	return sf
}

func (sf *serverFlags) load(dev bool) (*config.Config, error) {
	if dev {
		sf.v.SetDefault("dev", true)
	}
	return sf.schema.Load(sf.v, sf.configFile)
}

// logOutput is where the logs go: log.file when set, else w. The caller
// closes what it returns.
func logOutput(cfg *config.Config, w io.Writer) (io.Writer, func() error, error) {
	if cfg.Log.File == "" || cfg.Log.File == "-" {
		return w, func() error { return nil }, nil
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Log.File), 0o700); err != nil {
		return nil, nil, fmt.Errorf("log.file %s: %w", cfg.Log.File, err)
	}
	f, err := os.OpenFile(cfg.Log.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("log.file: %w", err)
	}
	return f, f.Close, nil
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// minLevel drops records below a level.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(a), m.min}
}
func (m minLevel) WithGroup(n string) slog.Handler { return minLevel{m.Handler.WithGroup(n), m.min} }

func newDevCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a development gateway: local Dask clusters, plain HTTP, a dev user",
		Long: `Run a gateway for development on this machine, with embedded defaults:
SQLite state in the data directory, the local provider (Dask processes on this
machine), one port on 127.0.0.1:8000, and an embedded OpenID Connect provider on
another loopback port. The CLI is signed in as the user "dev" through that
provider's device flow, so that other gateway commands just work; gateway login
signs in as "dev2" or "admin" (an admin) instead.

Not for production: it serves plain HTTP, its identity provider signs anyone on
this machine in as any of its users without a password, and no built-in quota
applies (gateway serve gives every user 5 clusters and 2 image builds at once
unless configured otherwise). It answers only requests addressed to its
loopback address and port (127.0.0.1, localhost or [::1]), so that web pages
cannot reach it by pointing their own name at this machine.

At start it checks once whether the Python that runs the clusters
(providers.local.python) can serve Dask's dashboard, that is whether it has a
bokeh in the range its distributed accepts; Debian's python3-distributed has
none. If it cannot, the banner says so in one line with the install command,
and new-cluster and dashboard repeat it.`,
		Args: cobra.NoArgs,
	}
	sf := addServerFlags(cmd.Flags())
	first := cmd.Flags().Int("first-cluster", 0, "once signed in, start a cluster with this many workers and print how to connect to it (scripts/dev.sh asks for 2)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *first < 0 {
			return fmt.Errorf("--first-cluster %d: give the number of workers of the first cluster, or 0 for none", *first)
		}
		return runServer(cmd, sf, true, func(g *server.Gateway, cfg *config.Config) error {
			if err := devBanner(cmd, g, cfg, *first > 0); err != nil {
				return err
			}
			if *first > 0 {
				// After the banner, in this process: its progress and
				// snippet follow the banner instead of crossing it. A
				// cluster that does not start leaves the gateway running.
				if err := firstCluster(cmd, g.PublicURL, *first); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "the first cluster did not start: %v\n", err)
				}
			}
			return nil
		})
	}
	return cmd
}

// firstCluster starts a cluster as the CLI's signed-in user (dev) and
// prints its progress and how to connect, as gateway new-cluster does.
func firstCluster(cmd *cobra.Command, gatewayURL string, workers int) error {
	ctx := cmd.Context()
	c, err := (&globals{gateway: gatewayURL, output: "text"}).client(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	name, err := c.CreateShared(ctx, clusteropts.Request{Options: clusteropts.Options{Workers: workers}, Set: []string{clusteropts.FieldWorkers}}, nil)
	if err != nil {
		return err
	}
	progress := cmd.ErrOrStderr()
	fmt.Fprintf(progress, "Cluster %s requested\n", name)
	if err := awaitCluster(ctx, c, name, workers, 5*time.Minute, start, progress, cmd.OutOrStdout(), false); err != nil {
		return err
	}
	cli := cliName()
	fmt.Fprintf(progress, "\nThe gateway keeps running (Ctrl-C stops it and its clusters). In another shell: %s list | show | scale | stop | logs %s\n", cli, name)
	return nil
}

// runServer loads the configuration, builds the gateway, lets ready report
// on it, and serves until the command's context ends.
func runServer(cmd *cobra.Command, sf *serverFlags, dev bool, ready func(*server.Gateway, *config.Config) error) error {
	cfg, err := sf.load(dev)
	if err != nil {
		return err
	}
	logTo, closeLog, err := logOutput(cfg, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer closeLog()
	log := newLogger(cfg, logTo)
	// Libraries that log through the default logger (the OIDC provider
	// library does) go to the same place, but only from warnings up.
	slog.SetDefault(slog.New(minLevel{log.Handler(), slog.LevelWarn}))
	points, err := crashpoint.Parse(os.Getenv(crashpoint.EnvVar), server.CrashPoints()...)
	if err != nil {
		return err
	}
	if points != nil {
		log.Warn("crash test mode: this process kills itself at a crash point", "spec", os.Getenv(crashpoint.EnvVar))
	}
	base := crashpoint.With(cmd.Context(), points)
	g, err := server.New(base, cfg, log, buildVersion())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(base)
	defer cancel()
	var readyErr error
	if ready != nil {
		// After Run has started serving: ready may talk to the gateway.
		go func() {
			if err := ready(g, cfg); err != nil {
				readyErr = err
				cancel()
			}
		}()
	}
	if err := g.Run(ctx); err != nil {
		return err
	}
	return readyErr
}

func devBanner(cmd *cobra.Command, g *server.Gateway, cfg *config.Config, firstCluster bool) error {
	// Sign the CLI in as the dev user through the embedded issuer's real
	// device flow, approved here as a person would approve it in the
	// browser: the CLI then holds real ID and refresh tokens.
	ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
	defer cancel()
	var credPath string
	entry, err := devLogin(ctx, g.PublicURL, "dev")
	if err == nil {
		if err = storeLogin(client.Key(g.PublicURL), entry, ""); err == nil {
			credPath, err = client.CredentialsPath()
		}
	}
	if err != nil {
		return fmt.Errorf("sign the CLI in as the dev user: %w", err)
	}
	users := make([]string, 0, len(server.DevUsers()))
	for _, u := range server.DevUsers() {
		users = append(users, u.Username)
	}
	// One line, only when dashboards cannot work: Debian's Dask has no bokeh.
	dashLine := ""
	if problem := g.DashboardProblem(ctx); problem != "" {
		dashLine = "    dashboards:    " + problem + "\n"
	}
	cli := cliName()
	cliLine := ""
	if cli != "gateway" {
		cliLine = fmt.Sprintf("    the CLI:       %s   (to type just gateway: export PATH=\"%s:$PATH\")\n", cli, exeDir())
	}
	logLine := ""
	if cfg.Log.File != "" && cfg.Log.File != "-" {
		logLine = "    logs:          " + cfg.Log.File + "   (--log-file - shows them here instead)\n"
	}
	next := cli + " new-cluster --workers 2"
	if firstCluster {
		next = "a first cluster starts now, below"
	}
	fmt.Fprintf(cmd.ErrOrStderr(), `
  gateway dev: FOR DEVELOPMENT ONLY (plain HTTP, an embedded identity provider that signs anyone in, %s)
    gateway URL:   %s
    web console:   %s/  (open it in a browser; sign in as dev, dev2 or admin)
    dev issuer:    %s  (loopback only; identities: %s)
    data dir:      %s
%s    CLI signed in: as "dev" (credentials in %s)
%s    quotas:        configured ones only (gateway serve adds built-in defaults: max_clusters 5, max_builds 2 per user)
%s    next:                    %s
    as someone else:         %s login   (approve in the browser as dev2 or admin)
    for dask_gateway:        %s dask-config   (then Gateway() with no arguments reaches this gateway)

`, g.RunsOn(), g.PublicURL, g.PublicURL, g.Issuer, strings.Join(users, ", "), cfg.DataDir, logLine, credPath, cliLine, dashLine, next, cli, cli)
	return nil
}

// exeDir is the folder of this binary, for the PATH hint.
func exeDir() string {
	exe, err := os.Executable()
	if err != nil {
		return "bin"
	}
	return filepath.Dir(exe)
}

// devLogin runs the device flow against the gateway's issuer and approves
// it for username through the development issuer's own approval form.
func devLogin(ctx context.Context, gatewayURL, username string) (client.Entry, error) {
	anon, err := client.New(gatewayURL, "", nil)
	if err != nil {
		return client.Entry{}, err
	}
	ac, oc, err := client.Discover(ctx, anon)
	if err != nil {
		return client.Entry{}, err
	}
	tok, err := client.DeviceLogin(ctx, oc, func(r *oauth2.DeviceAuthResponse) error {
		return approveDevice(ctx, r.VerificationURI, r.UserCode, username)
	})
	if err != nil {
		return client.Entry{}, err
	}
	return client.EntryFromToken(ac, oc, tok)
}

func approveDevice(ctx context.Context, verificationURI, userCode, username string) error {
	form := url.Values{"user_code": {userCode}, "username": {username}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, verificationURI, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("the development issuer refused the approval: %s %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the gateway server (TLS by default)",
		Args:  cobra.NoArgs,
	}
	sf := addServerFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return runServer(cmd, sf, false, nil)
	}
	return cmd
}

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Show the server configuration"}
	print := &cobra.Command{
		Use:   "print",
		Short: "Print the effective configuration (secrets redacted) as YAML",
		Args:  cobra.NoArgs,
	}
	sf := addServerFlags(print.Flags())
	dev := print.Flags().Bool("dev", false, "show the configuration gateway dev would use")
	print.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := sf.load(*dev)
		if err != nil {
			return err
		}
		b, err := yaml.Marshal(cfg.Redacted())
		if err != nil {
			return err
		}
		_, err = cmd.OutOrStdout().Write(b)
		return err
	}
	keys := &cobra.Command{
		Use:   "keys",
		Short: "List every configuration key with its environment variable and meaning",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			docs := server.ConfigSchema().Docs()
			names := make([]string, 0, len(docs))
			for k := range docs {
				names = append(names, k)
			}
			sort.Strings(names)
			w := cmd.OutOrStdout()
			for _, k := range names {
				fmt.Fprintf(w, "%-28s %-36s %s\n", k, config.EnvName(k), docs[k])
			}
			return nil
		},
	}
	cmd.AddCommand(print, keys)
	return cmd
}
