package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gatewayhq/gateway/api/apitype"
)

// afterUnshare is what the CLI (and docs/using.md) say plainly about what
// ending a share ends, and what it cannot.
const afterUnshare = `Their API and dashboard access has ended (dashboards they hold open close within a second).
Dask connections they already made stay open, and the cluster's TLS credentials they received
keep working while the cluster runs: they could run code on it, so they could have copied them.
To end those too, stop the cluster (gateway stop %s) and start a new one.
`

// aboutSharing says what sharing gives.
const aboutSharing = `They see it in gateway list, connect with Gateway().connect(%[1]q) or gateway show %[1]s,
and open it with gateway dashboard %[1]s; it counts against your quota only.
They receive the cluster's TLS credentials (a Dask connection is a full credential): after
gateway unshare, connections they made stay open and those credentials work until the cluster stops.
`

func newShareCmd(g *globals) *cobra.Command {
	var with, allow []string
	cmd := &cobra.Command{
		Use:   "share NAME --with group:ops[,user:bob] [--allow scale,stop]",
		Short: "Share a cluster with users and groups (no --with: show whom it is shared with)",
		Long: `Share your cluster: the users and groups named may see it, connect to it
and open its dashboard; --allow scale and --allow stop let them scale and stop it
too. Sharing again with someone replaces what they may do. What the gateway lets
owners share is its cluster.sharing setting: off, groups (only groups you belong
to) or any. Every share is in the audit log, and so is everything someone else
does with the cluster.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			var s *apitype.Shares
			if len(with) == 0 {
				if len(allow) > 0 {
					return fmt.Errorf("say whom --allow is for: gateway share %s --with group:NAME --allow %s", args[0], strings.Join(allow, ","))
				}
				s, err = c.Shares(cmd.Context(), args[0])
			} else {
				s, err = c.Share(cmd.Context(), args[0], with, allow)
			}
			if err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), s)
			}
			w := cmd.OutOrStdout()
			if len(s.Shares) == 0 {
				fmt.Fprintf(w, "Cluster %s is not shared (cluster.sharing on this gateway: %s)\n", s.Cluster, s.Sharing)
				return nil
			}
			fmt.Fprintf(w, "Cluster %s is shared with:\n", s.Cluster)
			printShares(w, s.Shares)
			if len(with) > 0 {
				fmt.Fprintf(w, "\n"+aboutSharing, s.Cluster)
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&with, "with", nil, "user:NAME or group:NAME, comma-separated or repeated")
	cmd.Flags().StringSliceVar(&allow, "allow", nil, "what they may do beyond viewing and connecting: scale, stop")
	return cmd
}

func newUnshareCmd(g *globals) *cobra.Command {
	var with []string
	cmd := &cobra.Command{
		Use:   "unshare NAME [--with group:ops,user:bob]",
		Short: "End shares of a cluster (without --with: all of them)",
		Long: `End shares of your cluster: their API and dashboard access ends at once.
Dask connections they already made stay open, and the cluster's TLS credentials
they received keep working until the cluster stops: stop it to end those too.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			s, err := c.Unshare(cmd.Context(), args[0], with)
			if err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), s)
			}
			w := cmd.OutOrStdout()
			if len(s.Removed) == 0 {
				fmt.Fprintf(w, "Cluster %s was not shared with %s: nothing changed\n", s.Cluster, orEveryone(with))
				return nil
			}
			fmt.Fprintf(w, "Cluster %s is no longer shared with:\n", s.Cluster)
			printShares(w, s.Removed)
			if len(s.Shares) > 0 {
				fmt.Fprintf(w, "It is still shared with:\n")
				printShares(w, s.Shares)
			}
			fmt.Fprintf(w, "\n"+afterUnshare, s.Cluster)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&with, "with", nil, "user:NAME or group:NAME, comma-separated or repeated (default: everyone)")
	return cmd
}

func orEveryone(with []string) string {
	if len(with) == 0 {
		return "anyone"
	}
	return strings.Join(with, ", ")
}

// printShares lists shares, one a line: whom, and what they may do.
func printShares(w io.Writer, shares []apitype.Share) {
	for _, sh := range shares {
		who := sh.With
		if sh.Name != "" {
			who = "user:" + sh.Name
		}
		may := "view, connect"
		if len(sh.Allow) > 0 {
			may += ", " + strings.Join(sh.Allow, ", ")
		}
		fmt.Fprintf(w, "  %-24s may %s\n", who, may)
	}
}

// ownerColumn is the OWNER column of gateway list: you, or the owner of a
// cluster shared with you and what you may do with it.
func ownerColumn(d apitype.ClusterDetail) string {
	if d.Access == nil {
		return "you"
	}
	owner := ownerName(d)
	if len(d.Access.Allow) == 0 {
		return owner + " (shared)"
	}
	return owner + " (shared: " + strings.Join(d.Access.Allow, ",") + ")"
}

// printAccess says, in gateway show, whom the caller's cluster is shared
// with, or how a cluster shared with them reaches them.
func printAccess(w io.Writer, d *apitype.ClusterDetail) {
	if d.Access != nil {
		may := "view, connect"
		if len(d.Access.Allow) > 0 {
			may += ", " + strings.Join(d.Access.Allow, ", ")
		}
		fmt.Fprintf(w, "Shared:    with you (%s) by %s: you may %s\n", strings.Join(d.Access.Via, ", "), ownerName(*d), may)
		return
	}
	if len(d.SharedWith) > 0 {
		fmt.Fprintf(w, "Shared with:\n")
		printShares(w, d.SharedWith)
	}
}

func ownerName(d apitype.ClusterDetail) string {
	if d.OwnerName != "" {
		return d.OwnerName
	}
	return d.Owner
}
