// Command terrace is the Terrace binary: `terrace server` runs the platform;
// `terrace stack …` uploads stack configurations and follows their runs.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/terracehq/terrace/internal/orchcli"
	"github.com/terracehq/terrace/internal/stack/stackcli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{
		Use:           "terrace",
		Short:         "Terrace: a self-hosted platform for Terraform and OpenTofu",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serverCmd())
	root.AddCommand(agentCmd())
	root.AddCommand(keysCmd())
	root.AddCommand(userCmd())
	root.AddCommand(orchcli.Commands()...)
	root.AddCommand(stackcli.Command(nil))
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "terrace:", err)
		os.Exit(1)
	}
}
