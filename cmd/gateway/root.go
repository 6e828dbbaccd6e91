package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gatewayhq/gateway/client"
)

// globals are the flags every client command shares.
type globals struct {
	gateway string
	token   string
	caFile  string
	output  string
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "gateway",
		Short: "Ephemeral Dask clusters for every user of a team, behind one gateway",
		Long: `gateway runs Dask clusters for authenticated users and is the single door to them.

Server:   gateway dev            (development: local clusters, plain HTTP, a dev user)
          gateway serve          (production: TLS, configured authentication)
          gateway config print | keys
Access:   gateway login, logout, whoami, print-token, token, sessions
Clusters: gateway new-cluster, list, show, scale, adapt, stop, logs, dashboard, share, unshare
Python:   gateway dask-config    (dask_gateway's Gateway() with no arguments; gateway login writes it)
Software: gateway env, instance-types
Bench:    gateway bench run, schedule, history, report, check
Limits:   gateway quota, usage, admin (admins only)`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildVersion(),
	}
	root.SetFlagErrorFunc(flagError)
	pf := root.PersistentFlags()
	pf.StringVar(&g.gateway, "gateway", os.Getenv("GATEWAY_URL"), "gateway URL (env GATEWAY_URL; default: the one last used by gateway dev or login)")
	pf.StringVar(&g.token, "token", "", "API token (env GATEWAY_TOKEN; default: from the credentials file)")
	pf.StringVar(&g.caFile, "ca-file", os.Getenv("GATEWAY_CA_FILE"), "PEM file of the CA that signed the gateway's certificate (env GATEWAY_CA_FILE)")
	pf.StringVarP(&g.output, "output", "o", "text", "output format of read commands: text (also called table) or json; admin usage and bench history also csv")

	root.AddCommand(
		newDevCmd(), newServeCmd(), newConfigCmd(),
		newNewClusterCmd(g), newInstanceTypesCmd(g), newListCmd(g), newShowCmd(g), newScaleCmd(g), newAdaptCmd(g), newStopCmd(g), newLogsCmd(g),
		newShareCmd(g), newUnshareCmd(g), newDaskConfigCmd(g),
		newLoginCmd(g), newLogoutCmd(g), newTokenCmd(g), newSessionsCmd(g), newWhoamiCmd(g), newPrintTokenCmd(g), newDashboardCmd(g),
		newUsageCmd(g), newQuotaCmd(g), newAdminCmd(g), newEnvCmd(g), newBenchCmd(g), newDebugCmd(),
	)
	return root
}

// flagError says what to type instead of a flag's bad value: pflag's own
// text names Go's parser ("strconv.ParseInt: parsing \"abc\": invalid
// syntax"), which tells a person nothing.
func flagError(cmd *cobra.Command, err error) error {
	var iv *pflag.InvalidValueError
	if !errors.As(err, &iv) {
		return err
	}
	want := ""
	switch iv.GetFlag().Value.Type() {
	case "int", "int32", "int64", "uint", "uint32", "uint64":
		want = "a whole number, e.g. --%s 2"
	case "float32", "float64":
		want = "a number, e.g. --%s 1.5"
	case "duration":
		want = "a duration such as 90s, 20m or 1h30m, e.g. --%s 20m"
	case "bool":
		want = "true or false, e.g. --%s=false"
	default:
		return err
	}
	return fmt.Errorf("--%s %q: the value must be "+want+" (see %s --help)",
		iv.GetFlag().Name, iv.GetValue(), iv.GetFlag().Name, cmd.CommandPath())
}

// workerCount is "1 worker", "2 workers".
func workerCount(n int) string {
	if n == 1 {
		return "1 worker"
	}
	return fmt.Sprintf("%d workers", n)
}

func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " (" + s.Value[:12] + ")"
		}
	}
	return v
}

// client builds an API client from flags, environment and the credentials file.
// session resolves which gateway to talk to and with which credentials,
// renewing an expired OIDC login with its refresh token.
type session struct {
	url   string
	token string
	entry client.Entry
	// renew is set when the token is a stored login's: long commands
	// renew it as they go.
	renew bool
}

func (g *globals) session(ctx context.Context) (*session, error) {
	creds, err := client.LoadCredentials()
	if err != nil {
		return nil, err
	}
	url, err := g.urlFrom(creds)
	if err != nil {
		return nil, err
	}
	s := &session{url: url, entry: creds.Gateways[url]}
	s.token = g.token
	if s.token == "" {
		s.token = os.Getenv("GATEWAY_TOKEN")
	}
	if s.token != "" {
		return s, nil
	}
	if s.entry.Token != "" {
		fresh, changed, err := s.entry.Fresh(ctx, time.Now())
		if err != nil {
			return nil, err
		}
		if changed {
			creds.Gateways[s.url] = fresh
			if err := creds.Save(); err != nil {
				return nil, fmt.Errorf("save renewed credentials: %w", err)
			}
			s.entry = fresh
		}
	}
	s.token = s.entry.Token
	s.renew = !s.entry.Expiry.IsZero()
	return s, nil
}

// client builds an API client from flags, environment and the credentials file.
func (g *globals) client(ctx context.Context) (*client.Client, error) {
	if g.output != "text" && g.output != "json" {
		return nil, fmt.Errorf("--output %q: use text or json", g.output)
	}
	s, err := g.session(ctx)
	if err != nil {
		return nil, err
	}
	c, err := g.clientFor(s.url, s.token, s.entry.CAFile)
	if err != nil || !s.renew {
		return c, err
	}
	return c.WithTokenSource(client.NewEntrySource(s.url, s.entry)), nil
}

func (g *globals) clientFor(url, token, caFile string) (*client.Client, error) {
	if g.caFile != "" {
		caFile = g.caFile
	}
	var tlsCfg *tls.Config
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", caFile)
		}
		tlsCfg = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return client.New(url, token, tlsCfg)
}

func (g *globals) json() bool { return g.output == "json" }

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
