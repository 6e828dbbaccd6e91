package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gatewayhq/gateway/api/apitype"
)

func newEnvStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status HASH",
		Short: "Show the state of an environment you asked for: building, ready or failed, with its steps",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			st, err := c.EnvStatus(cmd.Context(), strings.TrimSpace(args[0]))
			if err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), st)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Hash:   %s\nImage:  %s\nState:  %s\n", st.Hash, orDash(st.Image), st.State)
			for _, s := range st.Steps {
				fmt.Fprintf(w, "  %s\n", s)
			}
			if st.Error != "" {
				fmt.Fprintf(w, "Error:  %s\n", st.Error)
			}
			names := make([]string, 0, len(st.Versions))
			for n := range st.Versions {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				fmt.Fprintf(w, "  %s %s\n", n, st.Versions[n])
			}
			return nil
		},
	}
}

func newAdminEnvCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Publish environments for every user, or unpublish them (recorded in the audit log)",
	}
	cmd.AddCommand(newAdminEnvPublishCmd(g), newAdminEnvUnpublishCmd(g))
	return cmd
}

func newAdminEnvPublishCmd(g *globals) *cobra.Command {
	var req apitype.PublishEnvRequest
	cmd := &cobra.Command{
		Use:   "publish NAME (--env HASH | --image REF)",
		Short: "Publish a built environment (its image) or an image under NAME: every user may run it (gateway new-cluster --env NAME)",
		Example: `  gateway admin env publish team-2026 --env 3f9c2a1b0d4e5f60 --description "the team's environment"
  gateway admin env publish cuda --image ghcr.io/myorg/dask-cuda:2024.8`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (req.Env == "") == (req.Image == "") {
				return fmt.Errorf("give --env HASH (a built environment) or --image REF, one of them")
			}
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			p, err := c.AdminPublishEnv(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), p)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Published %s: %s (gateway env list shows it; gateway new-cluster --env %s runs it)\n", p.Name, p.Image, p.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&req.Env, "env", "", "the hash of a built environment (or its first 8 or more digits)")
	cmd.Flags().StringVar(&req.Image, "image", "", "an image reference (registry/repository:tag)")
	cmd.Flags().StringVar(&req.Description, "description", "", "what the environment is for")
	return cmd
}

func newAdminEnvUnpublishCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "unpublish NAME",
		Short:   "Unpublish an environment published with gateway admin env publish",
		Example: `  gateway admin env unpublish team-2026`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			if err := c.AdminUnpublishEnv(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Unpublished %s\n", args[0])
			return nil
		},
	}
}
