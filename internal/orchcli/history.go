package orchcli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// envDeployments lists an environment's deployments, newest first.
func (cl *client) envDeployments(cmd *cobra.Command, project, env string) ([]deployment, error) {
	var ds []deployment
	err := cl.do(cmd.Context(), http.MethodGet, "/projects/"+url.PathEscape(project)+"/envs/"+url.PathEscape(env)+"/deployments", nil, &ds)
	return ds, err
}

// printDeployments writes the history as a table.
func printDeployments(w io.Writer, ds []deployment) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMODE\tSTATUS\tBY\tCREATED\tCHANGES")
	for _, d := range ds {
		mode := d.Mode
		if d.RollbackOf != "" {
			mode += " to " + d.RollbackOf
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", d.ID, mode, d.Status, d.CreatedBy, d.CreatedAt.UTC().Format(time.RFC3339), len(d.Diff))
	}
	return tw.Flush()
}

type deploymentDiff struct {
	From       string   `json:"from"`
	To         string   `json:"to"`
	Changes    []change `json:"changes"`
	NumAdded   int      `json:"num_added"`
	NumChanged int      `json:"num_changed"`
	NumRemoved int      `json:"num_removed"`
}

func (c *config) diffCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "diff (<project> <env> | <deployment> [<from-deployment>])",
		Short: "Show the resource-graph changes between two deployments",
		Long: `Show the node-level changes (added, removed, module_changed, params_changed)
between two deployments of an environment: the environment's last two
deployments, a deployment and the one before it, or a deployment and any
other deployment of the same environment.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			to, from := args[0], ""
			if len(args) == 2 {
				from = args[1]
			}
			if len(args) == 2 && !strings.HasPrefix(args[0], "dep-") {
				ds, err := cl.envDeployments(cmd, args[0], args[1])
				if err != nil {
					return err
				}
				if len(ds) == 0 {
					return fmt.Errorf("environment %s/%s has no deployments", args[0], args[1])
				}
				to, from = ds[0].ID, ""
			}
			path := "/deployments/" + url.PathEscape(to) + "/diff"
			if from != "" {
				path += "?from=" + url.QueryEscape(from)
			}
			var d deploymentDiff
			if err := cl.do(cmd.Context(), http.MethodGet, path, nil, &d); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if output == "json" {
				return print(w, "json", d)
			}
			fromName := d.From
			if fromName == "" {
				fromName = "(nothing)"
			}
			fmt.Fprintf(w, "Changes from %s to %s: %d added, %d changed, %d removed\n", fromName, d.To, d.NumAdded, d.NumChanged, d.NumRemoved)
			printDiff(w, d.Changes)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "print the diff as json")
	return cmd
}

func (c *config) rollbackCmd() *cobra.Command {
	var output, key string
	var showSensitive bool
	cmd := &cobra.Command{
		Use:   "rollback <project> <env> <deployment>",
		Short: "Deploy a past deployment's manifest and module versions again (a new deployment)",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			return cl.deploy(cmd, deployOpts{project: args[0], env: args[1], mode: "rollback", rollbackTo: args[2], output: output, key: key, showSensitive: showSensitive})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "print the result as json")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "a key that makes a retried rollback return the first one's deployment")
	cmd.Flags().BoolVar(&showSensitive, "show-sensitive", false, "show sensitive outputs (if you may read the environment's state)")
	return cmd
}

func (c *config) tfCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "tf <deployment>",
		Short: "Print the Terraform a deployment generated",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			var files map[string]string
			if err := cl.do(cmd.Context(), http.MethodGet, "/deployments/"+url.PathEscape(args[0])+"/tf", nil, &files); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if file != "" {
				src, ok := files[file]
				if !ok {
					return fmt.Errorf("deployment %s has no file %q (files: %s)", args[0], file, strings.Join(sortedNames(files), ", "))
				}
				_, err := io.WriteString(w, src)
				return err
			}
			for _, name := range sortedNames(files) {
				fmt.Fprintf(w, "# --- %s\n%s\n", name, files[name])
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "print only this file (e.g. main.tf)")
	return cmd
}

func (c *config) outputsCmd() *cobra.Command {
	var output string
	var showSensitive bool
	cmd := &cobra.Command{
		Use:   "outputs <project> <env>",
		Short: "Show an environment's workload outputs, resource outputs and metadata",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			o, err := cl.outputs(cmd, args[0], args[1], showSensitive)
			if err != nil {
				return err
			}
			if output == "json" {
				return print(cmd.OutOrStdout(), "json", o)
			}
			printOutputs(cmd.OutOrStdout(), o, true)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "print the outputs as json")
	cmd.Flags().BoolVar(&showSensitive, "show-sensitive", false, "show sensitive outputs (if you may read the environment's state)")
	return cmd
}

type envOutputs struct {
	Workloads map[string]map[string]any `json:"workloads"`
	Resources map[string]map[string]any `json:"resources"`
	Metadata  map[string]any            `json:"metadata"`
	Sensitive json.RawMessage           `json:"sensitive,omitempty"`
	Shown     bool                      `json:"sensitive_shown"`
}

func (cl *client) outputs(cmd *cobra.Command, project, env string, showSensitive bool) (*envOutputs, error) {
	path := "/projects/" + url.PathEscape(project) + "/envs/" + url.PathEscape(env) + "/outputs"
	if showSensitive {
		path += "?sensitive=true"
	}
	var o envOutputs
	return &o, cl.do(cmd.Context(), http.MethodGet, path, nil, &o)
}

func printOutputs(w io.Writer, o *envOutputs, resources bool) {
	if len(o.Workloads) > 0 {
		fmt.Fprintln(w, "Workload outputs:")
		_ = print(w, "yaml", o.Workloads)
	}
	if resources && len(o.Resources) > 0 {
		fmt.Fprintln(w, "Resource outputs:")
		_ = print(w, "yaml", o.Resources)
	}
	if len(o.Metadata) > 0 {
		fmt.Fprintln(w, "Resource metadata:")
		_ = print(w, "yaml", o.Metadata)
	}
	if !o.Shown && strings.Contains(string(o.Sensitive), "[") {
		fmt.Fprintln(w, "Sensitive outputs are shown as (sensitive); add --show-sensitive to see them.")
	}
}

func sortedNames(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
