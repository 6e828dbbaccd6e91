// Command gateway runs the gateway server (gateway dev, gateway serve) and
// is its command-line client (gateway new-cluster, list, show, ...).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/gatewayhq/gateway/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Code != "" {
			fmt.Fprintf(os.Stderr, "error: %s (%s)\n", ae.Message, ae.Code)
		} else {
			fmt.Fprintf(os.Stderr, "error: %s\n", err)
		}
		os.Exit(1)
	}
}
