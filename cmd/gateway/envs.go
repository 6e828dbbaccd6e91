package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/client"
	"github.com/gatewayhq/gateway/clusteropts"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/images/capture"
)

// softwareFlags choose what a cluster runs: the client's own environment
// (captured and built into an image), an environment file, a published
// environment, or an image.
type softwareFlags struct {
	env           string
	image         string
	envFile       string
	python        string
	codeDir       string
	noCode        bool
	allowMismatch bool
	buildTimeout  time.Duration
}

func (s *softwareFlags) add(f *pflag.FlagSet, withEnv bool) {
	if withEnv {
		f.StringVar(&s.env, "env", "auto", "software: auto (your Python's environment, built into an image when needed), none (the gateway's default image), or a published environment's name (gateway env list)")
		f.StringVar(&s.image, "image", "", "run this container image instead (its Python packages are checked against yours)")
		f.BoolVar(&s.allowMismatch, "allow-mismatch", false, "run even if the image's software differs from your Python's")
	}
	f.StringVar(&s.envFile, "env-file", "", "build from requirements.txt, environment.yml or pylock.toml instead of your Python's environment")
	f.StringVar(&s.python, "python", "", "the Python whose environment is used (default: python3 on PATH)")
	f.StringVar(&s.codeDir, "code-dir", ".", "directory whose local modules and packages go with the environment as code")
	f.BoolVar(&s.noCode, "no-code", false, "send no local modules (editable installs are still sent)")
	f.DurationVar(&s.buildTimeout, "build-timeout", 30*time.Minute, "how long to wait for an image build")
}

func (s *softwareFlags) captureOptions() capture.Options {
	o := capture.Options{Python: s.python, Dir: s.codeDir}
	if s.noCode {
		o.Dir = ""
	}
	return o
}

// capture describes the client's environment, from the env file when given.
func (s *softwareFlags) capture(ctx context.Context) (capture.Env, error) {
	if s.envFile != "" {
		return capture.FromFile(ctx, s.envFile, s.captureOptions())
	}
	return capture.Capture(ctx, s.captureOptions())
}

// options sets the software options of o for the chosen software,
// building the environment's image first when that is what was asked.
func (s *softwareFlags) options(ctx context.Context, cmd *cobra.Command, c *client.Client, progress io.Writer, o *clusteropts.Options) error {
	explicit := cmd.Flags().Changed("env") || s.image != "" || s.envFile != ""
	fields, err := c.OptionFields(ctx)
	if err != nil {
		return err
	}
	if !fields["image"] {
		if explicit {
			return errors.New("this gateway's provider runs no container images: --env, --image and --env-file need the docker, ec2, fargate or gce provider")
		}
		return nil // the local provider runs the gateway host's Python
	}
	o.AllowMismatch = s.allowMismatch
	switch {
	case s.image != "" && (cmd.Flags().Changed("env") || s.envFile != ""):
		return errors.New("--image runs an existing image: leave out --env and --env-file")
	case s.image != "" || (s.env != "auto" && s.env != "none" && s.envFile == ""):
		if s.image != "" {
			o.Image = s.image
		} else {
			o.Env = s.env
		}
		// The image is checked against the client's versions; without a
		// Python to compare with, only an explicit --python is an error.
		env, err := capture.Capture(ctx, capture.Options{Python: s.python})
		switch {
		case err == nil:
			o.ClientEnv = images.ExpectedVersions(env.Spec)
		case s.python != "" && !s.allowMismatch:
			return err
		default:
			fmt.Fprintf(progress, "Not checking the image against your Python: %v\n", err)
		}
		return nil
	case s.env == "none" && s.envFile == "":
		return nil
	}
	env, err := s.capture(ctx)
	if err != nil {
		// Asked for nothing in particular, a user whose Python is not a
		// Dask client's (or who has none here) still gets a cluster.
		if !explicit && s.python == "" && (errors.Is(err, capture.ErrNoInterpreter) || errors.Is(err, capture.ErrNoDask)) {
			fmt.Fprintf(progress, "Running the gateway's default image, unchecked: %v\n", err)
			return nil
		}
		return err
	}
	for _, n := range env.Notes {
		fmt.Fprintf(progress, "  %s\n", n)
	}
	st, err := buildEnv(ctx, c, env, s.buildTimeout, progress)
	var ae *client.APIError
	if !explicit && errors.As(err, &ae) && ae.Code == apitype.CodeNoBuilder {
		fmt.Fprintf(progress, "Running the gateway's default image, unchecked: %s\n", ae.Error())
		return nil
	}
	if err != nil {
		return err
	}
	o.Env, o.ClientEnv = st.Hash, images.ExpectedVersions(env.Spec)
	return nil
}

// buildEnv asks the gateway for the environment's image and follows its
// build, if one is needed, until it is ready.
func buildEnv(ctx context.Context, c *client.Client, env capture.Env, timeout time.Duration, progress io.Writer) (apitype.EnvStatus, error) {
	hash, err := env.Spec.Hash()
	if err != nil {
		return apitype.EnvStatus{}, err
	}
	fmt.Fprintf(progress, "Environment %s: Python %s, %d packages, %d code parts\n", hash[:16], env.Spec.Python, len(env.Spec.Packages), len(env.Spec.Code))
	// The code goes only when the gateway must build: the common case is
	// an image that exists already.
	st, err := c.EnsureEnv(ctx, env.Spec, nil)
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict && ae.Code == apitype.CodeCodeRequired {
		fmt.Fprintf(progress, "Sending %s of code\n", capture.FormatBytes(codeSize(env.Code)))
		st, err = c.EnsureEnv(ctx, env.Spec, env.Code)
	}
	if err != nil {
		return apitype.EnvStatus{}, err
	}
	if st.State == "ready" && !st.Built {
		fmt.Fprintf(progress, "Image %s (already built)\n", st.Image)
		return st, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	shown := 0
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		for ; shown < len(st.Steps); shown++ {
			fmt.Fprintf(progress, "  %s\n", st.Steps[shown])
		}
		switch st.State {
		case "ready":
			fmt.Fprintf(progress, "Image %s built\n", st.Image)
			return st, nil
		case "failed":
			return st, fmt.Errorf("the environment's image could not be built: %s\n(full log: gateway env logs %s)", st.Error, st.Hash)
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("the image of environment %s was not built within %s (it goes on: gateway env logs %s; wait longer with --build-timeout)", st.Hash[:16], timeout, st.Hash)
		case <-tick.C:
		}
		next, err := c.EnvStatus(ctx, st.Hash)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			return st, err
		}
		st = next
	}
}

func codeSize(code map[string][]byte) int64 {
	var n int64
	for _, b := range code {
		n += int64(len(b))
	}
	return n
}

func newEnvCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Software environments: build yours, list published ones, read build logs",
	}
	cmd.AddCommand(newEnvListCmd(g), newEnvBuildCmd(g), newEnvStatusCmd(g), newEnvLogsCmd(g))
	return cmd
}

func newEnvListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the environments admins published (use one with gateway new-cluster --env NAME)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			envs, err := c.Envs(cmd.Context())
			if err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), envs)
			}
			if len(envs) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "No published environments (admins publish them in images.environments, or with gateway admin env publish).")
				return nil
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tPYTHON\tDASK\tIMAGE\tDESCRIPTION")
			for _, e := range envs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", e.Name, orDash(e.Versions["python"]), orDash(e.Versions["dask"]), e.Image, e.Description)
			}
			return w.Flush()
		},
	}
}

func newEnvBuildCmd(g *globals) *cobra.Command {
	var sw softwareFlags
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build (or find) the image of your Python environment, without starting a cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			env, err := sw.capture(cmd.Context())
			if err != nil {
				return err
			}
			progress := cmd.ErrOrStderr()
			if g.json() {
				progress = io.Discard
			}
			for _, n := range env.Notes {
				fmt.Fprintf(progress, "  %s\n", n)
			}
			st, err := buildEnv(cmd.Context(), c, env, sw.buildTimeout, progress)
			if err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), st)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", st.Hash, st.Image)
			return nil
		},
	}
	sw.add(cmd.Flags(), false)
	return cmd
}

func newEnvLogsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "logs HASH",
		Short: "Print the build log of an environment",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			s, err := c.EnvLogs(cmd.Context(), strings.TrimSpace(args[0]))
			if err != nil {
				return err
			}
			_, err = io.WriteString(cmd.OutOrStdout(), s)
			return err
		},
	}
}
