// Package stackcli is the stacks part of the terrace CLI:
//
//	terrace stack upload <stack-id> <folder>     upload a folder as a configuration
//	terrace stack deployments <stack-id>         list deployments and their latest runs
//	terrace stack runs <stack-id> <deployment>   list a deployment's runs
//	terrace stack watch <run-id>                 follow a run's steps until it ends
//	terrace stack approve <run-id>               approve the plan waiting in a run
//	terrace stack cancel <run-id>                cancel a run
//
// It talks to the TFE API v2 of a Terrace server through go-tfe:
// TERRACE_ADDRESS and TERRACE_TOKEN (or --address and --token); the
// server's certificate is checked against the system roots plus
// SSL_CERT_FILE.
package stackcli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	tfe "github.com/hashicorp/go-tfe"
	"github.com/spf13/cobra"
)

// Command returns `terrace stack`. httpClient is used for the API when
// not nil (tests pass one that trusts their server).
func Command(httpClient *http.Client) *cobra.Command {
	c := &config{http: httpClient}
	root := &cobra.Command{Use: "stack", Short: "Upload stack configurations, follow and approve deployment runs"}
	root.PersistentFlags().StringVar(&c.address, "address", "", "Terrace server address (default $TERRACE_ADDRESS)")
	root.PersistentFlags().StringVar(&c.token, "token", "", "API token (default $TERRACE_TOKEN)")
	upload := &cobra.Command{Use: "upload <stack-id> <folder>", Short: "Upload a folder as a new configuration and show how it was prepared, and its deployment runs",
		Args: cobra.ExactArgs(2), RunE: c.run(c.upload)}
	upload.Flags().BoolVar(&c.speculative, "speculative", false, "only plan each deployment (a speculative configuration, as for a pull request); the stack must have speculative-enabled")
	upload.Flags().StringSliceVar(&c.selected, "deployment", nil, "run only this deployment (repeat, or separate with commas); the others run when their group is rerun")
	root.AddCommand(
		upload,
		&cobra.Command{Use: "deployments <stack-id>", Short: "List a stack's deployments and their latest runs",
			Args: cobra.ExactArgs(1), RunE: c.run(c.deployments)},
		&cobra.Command{Use: "runs <stack-id> <deployment>", Short: "List a deployment's runs, newest first",
			Args: cobra.ExactArgs(2), RunE: c.run(c.runs)},
		&cobra.Command{Use: "watch <run-id>", Short: "Follow a deployment run's steps until it ends or waits for approval",
			Args: cobra.ExactArgs(1), RunE: c.run(c.watch)},
		&cobra.Command{Use: "approve <run-id>", Short: "Approve the plan waiting for an operator in a deployment run",
			Args: cobra.ExactArgs(1), RunE: c.run(c.approve)},
		&cobra.Command{Use: "cancel <run-id>", Short: "Cancel a deployment run",
			Args: cobra.ExactArgs(1), RunE: c.run(c.cancel)},
	)
	return root
}

type config struct {
	address, token string
	speculative    bool
	selected       []string
	http           *http.Client
}

type action func(ctx context.Context, api *tfe.Client, out io.Writer, args []string) error

func (c *config) run(a action) func(cmd *cobra.Command, args []string) error {
	return func(cmd *cobra.Command, args []string) error {
		api, err := c.client()
		if err != nil {
			return err
		}
		return a(cmd.Context(), api, cmd.OutOrStdout(), args)
	}
}

func (c *config) client() (*tfe.Client, error) {
	addr := firstNonEmpty(c.address, os.Getenv("TERRACE_ADDRESS"))
	token := firstNonEmpty(c.token, os.Getenv("TERRACE_TOKEN"))
	if addr == "" {
		return nil, fmt.Errorf("no server address: set TERRACE_ADDRESS or --address")
	}
	if token == "" {
		return nil, fmt.Errorf("no token: set TERRACE_TOKEN or --token")
	}
	if !strings.Contains(addr, "://") {
		addr = "https://" + addr
	}
	return tfe.NewClient(&tfe.Config{Address: addr, Token: token, HTTPClient: c.http, RetryServerErrors: false})
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func (c *config) upload(ctx context.Context, api *tfe.Client, out io.Writer, args []string) error {
	o := &tfe.CreateStackConfigurationOptions{SelectedDeployments: c.selected}
	if c.speculative {
		o.SpeculativeEnabled = tfe.Bool(true)
	}
	cfg, err := api.StackConfigurations.CreateAndUpload(ctx, args[0], args[1], o)
	if err != nil {
		return err
	}
	if cfg, err = api.StackConfigurations.Read(ctx, cfg.ID); err != nil {
		return err
	}
	kind := ""
	if cfg.Speculative {
		kind = ", speculative"
	}
	fmt.Fprintf(out, "configuration %s (#%d%s): %s\n", cfg.ID, cfg.SequenceNumber, kind, cfg.Status)
	diags, err := api.StackConfigurations.Diagnostics(ctx, cfg.ID)
	if err != nil {
		return err
	}
	for _, d := range diags.Items {
		where := ""
		if len(d.Diags) > 0 && d.Diags[0].Range != nil {
			r := d.Diags[0].Range
			where = fmt.Sprintf("%s:%d,%d: ", r.Filename, r.Start.Line, r.Start.Column)
		}
		fmt.Fprintf(out, "%s: %s%s\n", d.Severity, where, d.Summary)
		if d.Detail != "" {
			fmt.Fprintf(out, "  %s\n", d.Detail)
		}
	}
	if cfg.Status == tfe.StackConfigurationStatusFailed {
		return fmt.Errorf("configuration %s failed", cfg.ID)
	}
	// Its deployment runs, to watch.
	groups, err := api.StackDeploymentGroups.List(ctx, cfg.ID, &tfe.StackDeploymentGroupListOptions{ListOptions: tfe.ListOptions{PageSize: 100}})
	if err != nil {
		return err
	}
	for _, g := range groups.Items {
		runs, err := api.StackDeploymentRuns.List(ctx, g.ID, &tfe.StackDeploymentRunListOptions{ListOptions: tfe.ListOptions{PageSize: 100}})
		if err != nil {
			return err
		}
		for _, r := range runs.Items {
			fmt.Fprintf(out, "run %s (group %s): terrace stack watch %s\n", r.ID, g.Name, r.ID)
		}
	}
	return nil
}

func (c *config) deployments(ctx context.Context, api *tfe.Client, out io.Writer, args []string) error {
	l, err := api.StackDeployments.List(ctx, args[0], &tfe.StackDeploymentListOptions{ListOptions: tfe.ListOptions{PageSize: 100}})
	if err != nil {
		return err
	}
	for _, d := range l.Items {
		status, id := "no runs", ""
		if d.LatestDeploymentRun != nil && d.LatestDeploymentRun.ID != "" {
			r, err := api.StackDeploymentRuns.Read(ctx, d.LatestDeploymentRun.ID)
			if err != nil {
				return err
			}
			status, id = string(r.Status), r.ID
		}
		fmt.Fprintf(out, "%-20s %-32s %s\n", d.Name, status, id)
	}
	return nil
}

func (c *config) runs(ctx context.Context, api *tfe.Client, out io.Writer, args []string) error {
	req, err := api.NewRequest("GET", fmt.Sprintf("stacks/%s/stack-deployments/%s/stack-deployment-runs", url.PathEscape(args[0]), url.PathEscape(args[1])), nil)
	if err != nil {
		return err
	}
	l := &tfe.StackDeploymentRunList{}
	if err := req.Do(ctx, l); err != nil {
		return err
	}
	for _, r := range l.Items {
		fmt.Fprintf(out, "%s  %-32s %s\n", r.ID, r.Status, r.CreatedAt.Format(time.RFC3339))
	}
	return nil
}

// watch prints each step's status as it changes, and returns when the run
// ends or waits for an operator.
func (c *config) watch(ctx context.Context, api *tfe.Client, out io.Writer, args []string) error {
	seen := map[string]string{}
	for {
		r, err := api.StackDeploymentRuns.Read(ctx, args[0])
		if err != nil {
			return err
		}
		steps, err := api.StackDeploymentSteps.List(ctx, r.ID, nil)
		if err != nil {
			return err
		}
		for i, st := range steps.Items {
			if seen[st.ID] != string(st.Status) {
				seen[st.ID] = string(st.Status)
				fmt.Fprintf(out, "step %d %-6s %s\n", i+1, st.OperationType, st.Status)
				switch st.Status {
				case "completed", "failed", "pending-operator":
					stepLog(ctx, api, out, st)
				}
			}
		}
		switch r.Status {
		case tfe.DeploymentRunStatus("succeeded"), tfe.DeploymentRunStatus("failed"), tfe.DeploymentRunStatus("abandoned"):
			fmt.Fprintf(out, "run %s %s\n", r.ID, r.Status)
			if r.Status != "succeeded" {
				return fmt.Errorf("deployment run %s %s", r.ID, r.Status)
			}
			return nil
		case tfe.DeploymentRunStatus("pre-deploying-pending-operator"), tfe.DeploymentRunStatus("deploying-pending-operator"):
			fmt.Fprintf(out, "run %s waits for approval: terrace stack approve %s\n", r.ID, r.ID)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// stepLog prints the log of a step that has ended or waits: the plan's
// for a plan step, the apply's for an apply or import step.
func stepLog(ctx context.Context, api *tfe.Client, out io.Writer, st *tfe.StackDeploymentStep) {
	name := tfe.StackDeploymentStepArtifactPlanDebugLog
	if st.OperationType != "plan" {
		name = tfe.StackDeploymentStepArtifactApplyDebugLog
	}
	rc, err := api.StackDeploymentSteps.Artifacts(ctx, st.ID, name)
	if err != nil {
		fmt.Fprintf(out, "  (no %s: %v)\n", name, err)
		return
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		fmt.Fprintf(out, "  (reading %s: %v)\n", name, err)
		return
	}
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		fmt.Fprintf(out, "  | %s\n", line)
	}
}

func (c *config) approve(ctx context.Context, api *tfe.Client, out io.Writer, args []string) error {
	if err := api.StackDeploymentRuns.ApproveAllPlans(ctx, args[0]); err != nil {
		return err
	}
	fmt.Fprintf(out, "approved %s\n", args[0])
	return nil
}

func (c *config) cancel(ctx context.Context, api *tfe.Client, out io.Writer, args []string) error {
	if err := api.StackDeploymentRuns.Cancel(ctx, args[0]); err != nil {
		return err
	}
	fmt.Fprintf(out, "cancelled %s\n", args[0])
	return nil
}
