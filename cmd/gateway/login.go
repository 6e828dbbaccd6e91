package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/oauth2"

	"github.com/gatewayhq/gateway/client"
)

func newLoginCmd(g *globals) *cobra.Command {
	var browser, noDaskConfig bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Log in to the gateway with your organisation's identity (OIDC device flow, or --browser)",
		Long: `Log in with the identity provider the gateway trusts. By default this uses the
OAuth 2.0 device flow: it prints a URL and a code to approve in any browser.
With --browser it opens a browser on this machine (authorization code + PKCE,
with a loopback redirect). Tokens are kept in $XDG_CONFIG_HOME/gateway/credentials.json
(mode 0600) for that gateway and renewed automatically.

It also writes dask_gateway's configuration (~/.config/dask/gateway.yaml, or
$DASK_CONFIG/gateway.yaml; mode 0600), so that Gateway() with no arguments reaches
this gateway as you: see gateway dask-config. A file with settings of your own is
left unchanged (it says what to do); --no-dask-config skips it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			url, err := g.gatewayURL()
			if err != nil {
				return err
			}
			entry, err := login(ctx, g, url, browser, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if err := storeLogin(url, entry, g.caFile); err != nil {
				return err
			}
			c, err := g.clientFor(url, entry.Token, entry.CAFile)
			if err != nil {
				return err
			}
			who, err := c.Whoami(cmd.Context())
			if err != nil {
				return fmt.Errorf("logged in, but the gateway refused the token: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Logged in to %s as %v\n", url, who["name"])
			if !noDaskConfig {
				// The login stands whatever happens here: say so, and go on.
				if err := writeDaskConfig(cmd.Context(), cmd.OutOrStdout(), c, false, false); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: dask_gateway's configuration was not written: %v (try again with gateway dask-config)\n", err)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&browser, "browser", false, "log in with a browser on this machine instead of the device flow")
	cmd.Flags().BoolVar(&noDaskConfig, "no-dask-config", false, "do not write dask_gateway's configuration")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for the login to be approved")
	return cmd
}

// gatewayURL is the gateway named by --gateway / GATEWAY_URL, or the current one.
func (g *globals) gatewayURL() (string, error) {
	creds, err := client.LoadCredentials()
	if err != nil {
		return "", err
	}
	return g.urlFrom(creds)
}

// urlFrom is the gateway named by --gateway / GATEWAY_URL, or the one the
// credentials file holds as current.
func (g *globals) urlFrom(creds *client.Credentials) (string, error) {
	url := g.gateway
	if url == "" {
		url = creds.Current
	}
	if url == "" {
		return "", fmt.Errorf("no gateway to talk to: start one with `gateway dev`, or pass --gateway URL (or set GATEWAY_URL)")
	}
	return client.Key(url), nil
}

// login runs an interactive OIDC login against the gateway's issuer.
func login(ctx context.Context, g *globals, url string, browser bool, w io.Writer) (client.Entry, error) {
	anon, err := g.clientFor(url, "", "")
	if err != nil {
		return client.Entry{}, err
	}
	ac, oc, err := client.Discover(ctx, anon)
	if err != nil {
		return client.Entry{}, err
	}
	var tok *oauth2.Token
	if !browser && oc.Endpoint.DeviceAuthURL == "" {
		fmt.Fprintln(w, "The identity provider has no device flow; logging in with a browser on this machine instead.")
		browser = true
	}
	if browser {
		tok, err = client.BrowserLogin(ctx, oc, func(u string) {
			fmt.Fprintf(w, "Opening your browser to log in; if it does not open, visit:\n\n  %s\n\n", u)
			if p, err := exec.LookPath("xdg-open"); err == nil {
				_ = exec.Command(p, u).Start()
			}
		})
	} else {
		tok, err = client.DeviceLogin(ctx, oc, func(r *oauth2.DeviceAuthResponse) error {
			fmt.Fprintf(w, "To log in, visit:\n\n  %s\n\nand enter the code:  %s\n\n", r.VerificationURI, r.UserCode)
			if r.VerificationURIComplete != "" {
				fmt.Fprintf(w, "(or open %s)\n\n", r.VerificationURIComplete)
			}
			fmt.Fprintln(w, "Waiting for approval...")
			return nil
		})
	}
	if err != nil {
		return client.Entry{}, err
	}
	return client.EntryFromToken(ac, oc, tok)
}

// storeLogin keeps a login for url. A --ca-file given to login is kept
// with it (as an absolute path), so that later commands trust the same CA
// without repeating it; without one, the CA file kept before stays.
func storeLogin(url string, e client.Entry, caFile string) error {
	creds, err := client.LoadCredentials()
	if err != nil {
		return err
	}
	e.CAFile = creds.Gateways[url].CAFile
	if caFile != "" {
		abs, err := filepath.Abs(caFile)
		if err != nil {
			return fmt.Errorf("--ca-file: %w", err)
		}
		e.CAFile = abs
	}
	creds.Gateways[url] = e
	creds.Current = url
	return creds.Save()
}

func newLogoutCmd(g *globals) *cobra.Command {
	var keepSessions bool
	cmd := &cobra.Command{
		Use:   "logout",
		Short: "End your browser sessions and forget the stored login for the gateway",
		Long: `Ends every browser (dashboard) session of yours on the gateway, removes the
dask configuration gateway login wrote for it and revokes its token, then forgets
the login stored on this machine. Other API tokens keep working: revoke them with
"gateway token revoke". With --keep-sessions, browser sessions are left alone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, err := g.gatewayURL()
			if err != nil {
				return err
			}
			creds, err := client.LoadCredentials()
			if err != nil {
				return err
			}
			e, ok := creds.Gateways[url]
			if !ok || e.Token == "" {
				fmt.Fprintf(cmd.OutOrStdout(), "Not logged in to %s\n", url)
				return nil
			}
			if !keepSessions {
				// A browser signed in with this identity would otherwise
				// stay signed in for up to auth.session_ttl.
				n, err := endSessions(cmd.Context(), g)
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: your browser sessions were not ended (%v); end them later with: gateway login && gateway sessions revoke --all\n", err)
				} else if n > 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "Ended %d browser session(s)\n", n)
				}
			}
			if c, err := g.client(cmd.Context()); err == nil {
				err = removeDaskConfig(cmd.Context(), cmd.OutOrStdout(), c)
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v\n", err)
				}
			}
			// Loaded again: ending the sessions may have renewed and saved the login.
			if creds, err = client.LoadCredentials(); err != nil {
				return err
			}
			creds.Gateways[url] = client.Entry{CAFile: creds.Gateways[url].CAFile}
			if err := creds.Save(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Logged out of %s\n", url)
			return nil
		},
	}
	cmd.Flags().BoolVar(&keepSessions, "keep-sessions", false, "leave browser sessions signed in")
	return cmd
}

func endSessions(ctx context.Context, g *globals) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := g.client(ctx)
	if err != nil {
		return 0, err
	}
	return c.RevokeSessions(ctx)
}

func newWhoamiCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Show who the gateway takes you for: subject, email, groups, admin, token expiry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			u, err := c.Whoami(cmd.Context())
			if err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), u)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "User:     %v\nGateway:  %s\n", u["name"], c.BaseURL())
			for _, k := range []string{"subject", "email", "groups", "admin", "via", "read_only", "expires"} {
				if v, ok := u[k]; ok && v != nil && v != "" {
					fmt.Fprintf(w, "%-9s %v\n", titleCase(k)+":", v)
				}
			}
			return nil
		},
	}
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	b := []byte(s)
	if b[0] >= 'a' && b[0] <= 'z' {
		b[0] -= 'a' - 'A'
	}
	for i := range b {
		if b[i] == '_' {
			b[i] = ' '
		}
	}
	return string(b)
}
