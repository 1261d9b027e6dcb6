// Package orchcli is the orchestrator part of the terrace CLI, in the
// seed's style:
//
//	terrace create|get|update|delete <kind> <id> [--set k=v] [--set-yaml=@file] [--set-json=@file]
//	terrace deploy <project> <env> <manifest.yaml> [--dry-run] [--plan-only] [-o json]
//	terrace destroy <project> <env>
//	terrace graph <project> <env> <manifest.yaml> [-o json|mermaid]
//
// It talks to /api/terrace/v1 of a Terrace server: TERRACE_ADDRESS,
// TERRACE_TOKEN and TERRACE_ORG (the flags --address, --token and --org
// override them); the server's certificate is checked against the system
// roots plus SSL_CERT_FILE.
package orchcli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
)

// Commands returns the orchestrator commands to add to the root command.
func Commands() []*cobra.Command {
	c := &config{}
	cmds := []*cobra.Command{
		c.objectCmd("create", "Create an object"),
		c.objectCmd("get", "Show an object, or list a kind's objects when no id is given"),
		c.objectCmd("update", "Change fields of an object (each module update is a new version)"),
		c.objectCmd("delete", "Delete an object"),
		c.deployCmd(),
		c.destroyCmd(),
		c.graphCmd(),
		c.diffCmd(),
		c.rollbackCmd(),
		c.tfCmd(),
		c.outputsCmd(),
	}
	for _, cmd := range cmds {
		f := cmd.Flags()
		f.StringVar(&c.address, "address", "", "Terrace server address (default $TERRACE_ADDRESS)")
		f.StringVar(&c.token, "token", "", "API token (default $TERRACE_TOKEN)")
		f.StringVar(&c.org, "org", "", "organization (default $TERRACE_ORG)")
	}
	return cmds
}

type config struct {
	address, token, org string
}

// client is an API client for one command.
type client struct {
	base  string
	token string
	org   string
	http  *http.Client
}

func (c *config) client() (*client, error) {
	addr := firstNonEmpty(c.address, os.Getenv("TERRACE_ADDRESS"))
	token := firstNonEmpty(c.token, os.Getenv("TERRACE_TOKEN"))
	org := firstNonEmpty(c.org, os.Getenv("TERRACE_ORG"))
	switch {
	case addr == "":
		return nil, fmt.Errorf("no server address: set TERRACE_ADDRESS or --address")
	case token == "":
		return nil, fmt.Errorf("no token: set TERRACE_TOKEN or --token")
	case org == "":
		return nil, fmt.Errorf("no organization: set TERRACE_ORG or --org")
	}
	if !strings.Contains(addr, "://") {
		addr = "https://" + addr
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading SSL_CERT_FILE: %w", err)
		}
		pool.AppendCertsFromPEM(pem)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &client{base: strings.TrimRight(addr, "/") + "/api/terrace/v1/orgs/" + url.PathEscape(org), token: token, org: org,
		http: &http.Client{Transport: tr, Timeout: 2 * time.Minute}}, nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// apiError is an error answer of the server.
type apiError struct {
	Status int
	Errors []struct {
		Title  string          `json:"title"`
		Detail string          `json:"detail"`
		Field  string          `json:"field"`
		Node   json.RawMessage `json:"node"`
		Code   string          `json:"code"`
	} `json:"errors"`
}

func (e *apiError) Error() string {
	if len(e.Errors) == 0 {
		return fmt.Sprintf("the server answered %d", e.Status)
	}
	var lines []string
	for _, x := range e.Errors {
		switch {
		case x.Field != "":
			lines = append(lines, x.Field+": "+x.Detail)
		case len(x.Node) > 0:
			var n struct{ Type, Class, ID string }
			_ = json.Unmarshal(x.Node, &n)
			lines = append(lines, fmt.Sprintf("%s.%s#%s: %s (%s)", n.Type, n.Class, n.ID, x.Detail, x.Code))
		case x.Detail != "":
			lines = append(lines, x.Detail)
		default:
			lines = append(lines, x.Title)
		}
	}
	if len(lines) == 1 {
		return fmt.Sprintf("%s (%d)", lines[0], e.Status)
	}
	return fmt.Sprintf("the server answered %d:\n  %s", e.Status, strings.Join(lines, "\n  "))
}

// do sends a request; out (if not nil) receives the JSON answer.
func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		e := &apiError{Status: resp.StatusCode}
		_ = json.Unmarshal(b, e)
		return e
	}
	if out != nil && len(b) > 0 {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		return dec.Decode(out)
	}
	return nil
}

// kindPath maps a kind and its id arguments to the collection path and the
// object's id ("" for none). Environments are "<project> <env>" or
// "<project>/<env>", providers "<type> <id>" or "<type>.<id>".
func kindPath(kind string, args []string, verb string) (coll, id string, err error) {
	one := func() (string, error) {
		switch {
		case len(args) == 0:
			return "", nil
		case len(args) == 1:
			return args[0], nil
		}
		return "", fmt.Errorf("%s takes one id", kind)
	}
	two := func(sep string) (string, string, error) {
		if len(args) == 1 {
			if a, b, ok := strings.Cut(args[0], sep); ok {
				return a, b, nil
			}
			return args[0], "", nil
		}
		if len(args) == 2 {
			return args[0], args[1], nil
		}
		if len(args) == 0 {
			return "", "", nil
		}
		return "", "", fmt.Errorf("%s takes at most two ids", kind)
	}
	switch kind {
	case "project", "projects":
		id, err = one()
		return "/projects", id, err
	case "environment-type", "environment-types", "env-type", "env-types":
		id, err = one()
		return "/env-types", id, err
	case "resource-type", "resource-types":
		id, err = one()
		return "/resource-types", id, err
	case "module", "modules":
		id, err = one()
		return "/modules", id, err
	case "module-rule", "module-rules":
		id, err = one()
		return "/module-rules", id, err
	case "deployment", "deployments":
		if verb != "get" {
			return "", "", fmt.Errorf("deployments are made with terrace deploy and terrace destroy; get shows them")
		}
		switch len(args) {
		case 1:
			return "/deployments", args[0], nil
		case 2:
			return "/projects/" + url.PathEscape(args[0]) + "/envs/" + url.PathEscape(args[1]) + "/deployments", "", nil
		}
		return "", "", fmt.Errorf("get deployment <id>, or get deployments <project> <env>")
	case "environment", "environments", "env", "envs":
		p, e, err := two("/")
		if err != nil {
			return "", "", err
		}
		if p == "" {
			return "", "", fmt.Errorf("an environment is named <project> <env> (or <project>/<env>)")
		}
		return "/projects/" + url.PathEscape(p) + "/envs", e, nil
	case "provider", "providers", "module-provider", "module-providers":
		t, i, err := two(".")
		if err != nil {
			return "", "", err
		}
		if t == "" {
			return "/module-providers", "", nil
		}
		return "/module-providers/" + url.PathEscape(t), i, nil
	}
	return "", "", fmt.Errorf("unknown kind %q: use project, environment-type, environment, resource-type, provider, module or module-rule", kind)
}

// server-managed fields, dropped before an update is sent back.
var managed = []string{"uuid", "created_at", "updated_at", "version_id"}

func (c *config) objectCmd(verb, short string) *cobra.Command {
	var sets, setYAML, setJSON []string
	var output string
	cmd := &cobra.Command{
		Use:   verb + " <kind> [<id>...]",
		Short: short,
		Long: short + `.

Kinds: project, environment-type, environment (<project> <env>), resource-type,
provider (<provider_type> <id>), module, module-rule (created without an id);
get also shows deployment <id> and deployments <project> <env>.

--set k=v sets a string field (dotted keys reach into objects);
--set-json k=<json> and --set-yaml k=<yaml> set typed values;
--set-json=@file and --set-yaml=@file (or @- for stdin) merge a whole document.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			coll, id, err := kindPath(args[0], args[1:], verb)
			if err != nil {
				return err
			}
			path := coll
			if id != "" {
				path += "/" + url.PathEscape(id)
			}
			body := map[string]any{}
			switch verb {
			case "get":
				if strings.HasSuffix(coll, "/deployments") && id == "" && output == "table" {
					var ds []deployment
					if err := cl.do(ctx, http.MethodGet, path, nil, &ds); err != nil {
						return err
					}
					return printDeployments(cmd.OutOrStdout(), ds)
				}
				var out any
				if err := cl.do(ctx, http.MethodGet, path, nil, &out); err != nil {
					return err
				}
				if output == "table" {
					output = "yaml"
				}
				return print(cmd.OutOrStdout(), output, out)
			case "delete":
				if id == "" {
					return fmt.Errorf("delete needs the object's id")
				}
				if err := cl.do(ctx, http.MethodDelete, path, nil, nil); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted %s %s\n", args[0], strings.Join(args[1:], " "))
				return nil
			case "update":
				if id == "" {
					return fmt.Errorf("update needs the object's id")
				}
				if err := cl.do(ctx, http.MethodGet, path, nil, &body); err != nil {
					return err
				}
				for _, k := range managed {
					delete(body, k)
				}
			case "create":
				if id != "" {
					body["id"] = id
				}
			}
			if err := applySets(cmd.InOrStdin(), body, setYAML, setJSON, sets); err != nil {
				return err
			}
			var out any
			if verb == "create" {
				if err := cl.do(ctx, http.MethodPost, coll, body, &out); err != nil {
					return err
				}
			} else if err := cl.do(ctx, http.MethodPut, path, body, &out); err != nil {
				return err
			}
			return print(cmd.OutOrStdout(), output, out)
		},
	}
	if verb == "create" || verb == "update" {
		cmd.Flags().StringArrayVar(&sets, "set", nil, "set a field: key=value (string)")
		cmd.Flags().StringArrayVar(&setYAML, "set-yaml", nil, "merge a YAML document (@file, @- for stdin) or set key=<yaml>")
		cmd.Flags().StringArrayVar(&setJSON, "set-json", nil, "merge a JSON document (@file, @- for stdin) or set key=<json>")
	}
	if verb == "get" {
		cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table (deployments; yaml otherwise), yaml or json")
	} else if verb != "delete" {
		cmd.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	}
	return cmd
}

// applySets applies documents first, then typed and string fields.
func applySets(stdin io.Reader, body map[string]any, yamls, jsons, strs []string) error {
	parse := func(flag, text string, isJSON bool) (any, error) {
		var v any
		if isJSON {
			dec := json.NewDecoder(strings.NewReader(text))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil {
				return nil, fmt.Errorf("--%s: %w", flag, err)
			}
			return v, nil
		}
		if err := yaml.Unmarshal([]byte(text), &v); err != nil {
			return nil, fmt.Errorf("--%s: %w", flag, err)
		}
		return normalize(v), nil
	}
	for _, group := range []struct {
		flag   string
		vals   []string
		isJSON bool
	}{{"set-yaml", yamls, false}, {"set-json", jsons, true}} {
		for _, s := range group.vals {
			if file, ok := strings.CutPrefix(s, "@"); ok {
				text, err := readFile(stdin, file)
				if err != nil {
					return fmt.Errorf("--%s: %w", group.flag, err)
				}
				v, err := parse(group.flag, text, group.isJSON)
				if err != nil {
					return err
				}
				m, ok := v.(map[string]any)
				if !ok {
					return fmt.Errorf("--%s: %s is not an object", group.flag, file)
				}
				for k, x := range m {
					body[k] = x
				}
				continue
			}
			k, text, ok := strings.Cut(s, "=")
			if !ok {
				return fmt.Errorf("--%s: want key=value or @file, got %q", group.flag, s)
			}
			v, err := parse(group.flag, text, group.isJSON)
			if err != nil {
				return err
			}
			setPath(body, k, v)
		}
	}
	for _, s := range strs {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf("--set: want key=value, got %q", s)
		}
		setPath(body, k, v)
	}
	return nil
}

func readFile(stdin io.Reader, name string) (string, error) {
	if name == "-" {
		b, err := io.ReadAll(stdin)
		return string(b), err
	}
	b, err := os.ReadFile(name)
	return string(b), err
}

// setPath sets a dotted key, creating objects on the way.
func setPath(m map[string]any, key string, v any) {
	parts := strings.Split(key, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

// normalize turns YAML's map[any]any-free output into JSON-friendly values
// (yaml.v3 already uses map[string]any for string keys).
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
		return x
	case map[any]any:
		m := map[string]any{}
		for k, e := range x {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
		return x
	}
	return v
}

func print(w io.Writer, format string, v any) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml", "":
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var y any
		if err := yaml.Unmarshal(b, &y); err != nil {
			return err
		}
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(y); err != nil {
			return err
		}
		return enc.Close()
	}
	return fmt.Errorf("unknown output format %q (yaml or json)", format)
}

// readManifest reads a YAML (or JSON) manifest file ("-" for stdin).
func readManifest(stdin io.Reader, name string) (map[string]any, error) {
	text, err := readFile(stdin, name)
	if err != nil {
		return nil, err
	}
	var v any
	if err := yaml.Unmarshal([]byte(text), &v); err != nil {
		return nil, fmt.Errorf("reading the manifest %s: %w", name, err)
	}
	m, ok := normalize(v).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the manifest %s is not an object", name)
	}
	return m, nil
}

type change struct {
	Resource struct{ Type, Class, ID string } `json:"resource"`
	Type     string                           `json:"type"`
	Summary  string                           `json:"summary"`
}

func printDiff(w io.Writer, diff []change) {
	if len(diff) == 0 {
		fmt.Fprintln(w, "No changes to the resource graph.")
		return
	}
	sort.SliceStable(diff, func(i, j int) bool { return diff[i].Type < diff[j].Type })
	for _, c := range diff {
		sign := map[string]string{"added": "+", "removed": "-"}[c.Type]
		if sign == "" {
			sign = "~"
		}
		fmt.Fprintf(w, "  %s %s.%s#%s (%s)\n", sign, c.Resource.Type, c.Resource.Class, c.Resource.ID, c.Type)
	}
}

type deployment struct {
	ID            string    `json:"id"`
	Mode          string    `json:"mode"`
	Status        string    `json:"status"`
	StatusMessage string    `json:"status_message,omitempty"`
	Diff          []change  `json:"diff"`
	WorkspaceID   string    `json:"workspace_id,omitempty"`
	RunID         string    `json:"run_id,omitempty"`
	CreatedBy     string    `json:"created_by,omitempty"`
	RollbackOf    string    `json:"rollback_to_deployment_id,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
}

// deployOpts are the options of deploy, destroy and rollback.
type deployOpts struct {
	project, env, mode string
	manifest           map[string]any
	rollbackTo         string
	dryRun             bool
	output, key        string
	showSensitive      bool
}

func (c *config) deployCmd() *cobra.Command {
	var dryRun, planOnly, showSensitive bool
	var output, key string
	cmd := &cobra.Command{
		Use:   "deploy <project> <env> <manifest.yaml>",
		Short: "Deploy a manifest to an environment and print the workloads' outputs",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			m, err := readManifest(cmd.InOrStdin(), args[2])
			if err != nil {
				return err
			}
			mode := "deploy"
			if planOnly {
				mode = "plan_only"
			}
			return cl.deploy(cmd, deployOpts{project: args[0], env: args[1], mode: mode, manifest: m, dryRun: dryRun, output: output, key: key, showSensitive: showSensitive})
		},
	}
	cmd.Flags().StringVar(&key, "idempotency-key", "", "a key that makes a retried deploy return the first one's deployment")
	cmd.Flags().BoolVar(&showSensitive, "show-sensitive", false, "show sensitive outputs (if you may read the environment's state)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "compile and diff against the last deployment; change nothing")
	cmd.Flags().BoolVar(&planOnly, "plan-only", false, "plan the change (a speculative run) without applying it")
	cmd.Flags().StringVarP(&output, "output", "o", "", "print the result as json")
	return cmd
}

func (c *config) destroyCmd() *cobra.Command {
	var output string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "destroy <project> <env>",
		Short: "Destroy every resource of an environment",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			return cl.deploy(cmd, deployOpts{project: args[0], env: args[1], mode: "destroy", dryRun: dryRun, output: output})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show what would be removed; change nothing")
	cmd.Flags().StringVarP(&output, "output", "o", "", "print the result as json")
	return cmd
}

func (cl *client) deploy(cmd *cobra.Command, o deployOpts) error {
	ctx := cmd.Context()
	w := cmd.OutOrStdout()
	project, env, mode, dryRun, output := o.project, o.env, o.mode, o.dryRun, o.output
	req := map[string]any{"project_id": project, "env_id": env, "mode": mode, "is_dry_run": dryRun}
	if o.manifest != nil {
		req["manifest"] = o.manifest
	}
	if o.rollbackTo != "" {
		req["rollback_to_deployment_id"] = o.rollbackTo
	}
	if o.key != "" {
		req["idempotency_key"] = o.key
	}
	if dryRun {
		var out struct {
			Diff []change `json:"diff"`
		}
		var raw json.RawMessage
		if err := cl.do(ctx, http.MethodPost, "/deployments", req, &raw); err != nil {
			return err
		}
		if output == "json" {
			return print(w, "json", raw)
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			return err
		}
		fmt.Fprintf(w, "Dry run of %s/%s: nothing was changed.\n", project, env)
		printDiff(w, out.Diff)
		return nil
	}
	var d deployment
	if err := cl.do(ctx, http.MethodPost, "/deployments", req, &d); err != nil {
		return err
	}
	if output != "json" {
		fmt.Fprintf(w, "Deployment %s (%s) of %s/%s:\n", d.ID, d.Mode, project, env)
		printDiff(w, d.Diff)
	}
	for d.Status == "executing" {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		if err := cl.do(ctx, http.MethodGet, "/deployments/"+url.PathEscape(d.ID), nil, &d); err != nil {
			return err
		}
	}
	var outputs *envOutputs
	if d.Status == "succeeded" && mode != "plan_only" {
		var err error
		if outputs, err = cl.outputs(cmd, project, env, o.showSensitive); err != nil {
			return err
		}
	}
	if output == "json" {
		if err := print(w, "json", map[string]any{"deployment": d, "outputs": outputs}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(w, "Status: %s (workspace %s, run %s)\n", d.Status, d.WorkspaceID, d.RunID)
		if outputs != nil {
			printOutputs(w, outputs, false)
		}
	}
	if d.Status != "succeeded" {
		return fmt.Errorf("deployment %s %s: %s", d.ID, d.Status, d.StatusMessage)
	}
	return nil
}

func (c *config) graphCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "graph (<project> <env> <manifest.yaml> | <deployment>)",
		Short: "Print the resource graph a manifest compiles to, or that a past deployment used",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 && len(args) != 3 {
				return fmt.Errorf("graph takes <project> <env> <manifest.yaml>, or a deployment id")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			var out struct {
				Graph   json.RawMessage `json:"graph"`
				Mermaid string          `json:"mermaid"`
			}
			if len(args) == 1 {
				if err := cl.do(cmd.Context(), http.MethodGet, "/deployments/"+url.PathEscape(args[0])+"/graph", nil, &out); err != nil {
					return err
				}
			} else {
				m, err := readManifest(cmd.InOrStdin(), args[2])
				if err != nil {
					return err
				}
				req := map[string]any{"project_id": args[0], "env_id": args[1], "mode": "deploy", "is_dry_run": true, "manifest": m}
				if err := cl.do(cmd.Context(), http.MethodPost, "/deployments", req, &out); err != nil {
					return err
				}
			}
			switch output {
			case "json", "":
				var g any
				_ = json.Unmarshal(out.Graph, &g)
				return print(cmd.OutOrStdout(), "json", g)
			case "mermaid":
				_, err := io.WriteString(cmd.OutOrStdout(), out.Mermaid)
				return err
			}
			return fmt.Errorf("unknown output format %q (json or mermaid)", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "json", "json or mermaid")
	return cmd
}
