package orchestration

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/orchestrator"
	"github.com/terracehq/terrace/internal/store"
)

// loadDeployment reads one deployment with its stored graph state, graph
// view and Terraform files.
func (s *Service) loadDeployment(ctx context.Context, org, id string) (*Deployment, error) {
	ds, err := s.deployments(ctx, org, `id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, core.NotFound("deployment %s not found", id)
	}
	d := ds[0]
	var graph, view, tf string
	if err := s.db.QueryRow(ctx, `SELECT graph, graph_view, terraform FROM orchestrator_deployments WHERE id = ?`, id).Scan(&graph, &view, &tf); err != nil {
		return nil, err
	}
	if err := unmarshalNumber([]byte(graph), &d.state); err != nil {
		return nil, fmt.Errorf("decoding deployment %s's graph: %w", id, err)
	}
	_ = json.Unmarshal([]byte(view), &d.view)
	_ = json.Unmarshal([]byte(tf), &d.files)
	return d, nil
}

// DeploymentGraph is a past deployment's resource graph.
type DeploymentGraph struct {
	DeploymentID string                   `json:"deployment_id"`
	Graph        orchestrator.GraphJSON   `json:"graph"`
	Mermaid      string                   `json:"mermaid"`
	Nodes        []orchestrator.NodeState `json:"nodes"` // with module versions and params
}

// GetDeploymentGraph returns the graph a deployment compiled.
func (s *Service) GetDeploymentGraph(ctx context.Context, org, id string) (*DeploymentGraph, error) {
	if err := s.canRead(ctx, org); err != nil {
		return nil, err
	}
	d, err := s.loadDeployment(ctx, org, id)
	if err != nil {
		return nil, err
	}
	if err := s.allowDeployment(ctx, org, d, authz.RunRead); err != nil {
		return nil, err
	}
	g := d.view.Graph
	if g.Nodes == nil {
		g.Nodes = []orchestrator.NodeJSON{}
	}
	if g.Edges == nil {
		g.Edges = []orchestrator.EdgeJSON{}
	}
	return &DeploymentGraph{DeploymentID: d.ID, Graph: g, Mermaid: d.view.Mermaid, Nodes: nonNil(d.state)}, nil
}

// GetDeploymentTerraform returns the Terraform files a deployment
// generated (path → content; none for a destroy).
func (s *Service) GetDeploymentTerraform(ctx context.Context, org, id string) (map[string]string, error) {
	if err := s.canRead(ctx, org); err != nil {
		return nil, err
	}
	d, err := s.loadDeployment(ctx, org, id)
	if err != nil {
		return nil, err
	}
	// The generated Terraform is the configuration its run ran.
	if err := s.allowDeployment(ctx, org, d, authz.RunInputs); err != nil {
		return nil, err
	}
	if d.files == nil {
		d.files = map[string]string{}
	}
	return d.files, nil
}

// DeploymentDiff is the node-level difference between two deployments of
// one environment.
type DeploymentDiff struct {
	From       string                `json:"from"` // "" when the deployment is the environment's first
	To         string                `json:"to"`
	Changes    []orchestrator.Change `json:"changes"`
	NumAdded   int                   `json:"num_added"`
	NumChanged int                   `json:"num_changed"`
	NumRemoved int                   `json:"num_removed"`
}

// DiffDeployments compares deployment to with deployment from; an empty
// from is the deployment of the same environment made just before to.
func (s *Service) DiffDeployments(ctx context.Context, org, to, from string) (*DeploymentDiff, error) {
	if err := s.canRead(ctx, org); err != nil {
		return nil, err
	}
	b, err := s.loadDeployment(ctx, org, to)
	if err != nil {
		return nil, err
	}
	if err := s.allowDeployment(ctx, org, b, authz.RunRead); err != nil {
		return nil, err
	}
	var prev []orchestrator.NodeState
	if from == "" {
		err := s.db.QueryRow(ctx, `SELECT id FROM orchestrator_deployments WHERE organization_name = ? AND project_id = ? AND env_id = ? AND (created_at < ? OR (created_at = ? AND id < ?)) ORDER BY created_at DESC, id DESC LIMIT 1`,
			org, b.ProjectID, b.EnvID, core.Micros(b.CreatedAt), core.Micros(b.CreatedAt), b.ID).Scan(&from)
		if err != nil && !store.IsNoRows(err) {
			return nil, err
		}
	}
	if from != "" {
		a, err := s.loadDeployment(ctx, org, from)
		if err != nil {
			return nil, err
		}
		if err := s.allowDeployment(ctx, org, a, authz.RunRead); err != nil {
			return nil, err
		}
		if a.ProjectID != b.ProjectID || a.EnvID != b.EnvID {
			return nil, core.Invalid("deployments %s (%s/%s) and %s (%s/%s) are of different environments", a.ID, a.ProjectID, a.EnvID, b.ID, b.ProjectID, b.EnvID)
		}
		prev = a.state
	}
	out := &DeploymentDiff{From: from, To: b.ID, Changes: nonNil(orchestrator.Diff(prev, b.state))}
	for _, c := range out.Changes {
		switch c.Type {
		case orchestrator.ChangeAdded:
			out.NumAdded++
		case orchestrator.ChangeRemoved:
			out.NumRemoved++
		default:
			out.NumChanged++
		}
	}
	return out, nil
}

// EnvOutputs is an environment's current outputs: each workload's
// evaluated outputs, each resource's module outputs, and each resource's
// metadata (its humanitec_metadata or platform_orchestrator_metadata
// output, kept apart from the data). Sensitive outputs are replaced by
// HiddenValue unless asked for by a caller allowed to read the
// environment's state; Sensitive lists them either way.
type EnvOutputs struct {
	Workloads map[string]map[string]any `json:"workloads"`
	Resources map[string]map[string]any `json:"resources"`
	Metadata  map[string]any            `json:"metadata"`
	Sensitive orchestrator.Sensitivity  `json:"sensitive"`
	Shown     bool                      `json:"sensitive_shown"`
}

// HiddenValue stands for a sensitive output that was not asked for.
const HiddenValue = "(sensitive)"

// GetEnvOutputs returns the environment's current outputs (empty before
// the first deploy) to callers who may read the state outputs of the
// environment's workspace (authz.StateReadOutputs). showSensitive asks for
// sensitive values too: allowed to callers who may read its state
// (authz.StateRead).
func (s *Service) GetEnvOutputs(ctx context.Context, org, project, env string, showSensitive bool) (*EnvOutputs, error) {
	if err := s.canRead(ctx, org); err != nil {
		return nil, err
	}
	if _, err := s.environment(ctx, org, project, env); err != nil {
		return nil, err
	}
	out := &EnvOutputs{Workloads: map[string]map[string]any{}, Resources: map[string]map[string]any{}, Metadata: map[string]any{}}
	wsID, err := s.allowEnv(ctx, org, project, env, authz.StateReadOutputs)
	if err != nil {
		return nil, err
	}
	if wsID == "" {
		return out, nil
	}
	if showSensitive {
		// What reading the sensitive values in the workspace's state
		// needs.
		if err := authz.Allows(ctx, authz.StateRead, authz.Resource{Organization: org, WorkspaceID: wsID}); err != nil {
			return nil, err
		}
	}
	var view string
	err = s.db.QueryRow(ctx, `SELECT graph_view FROM orchestrator_deployments WHERE organization_name = ? AND project_id = ? AND env_id = ? AND mode IN `+stateModes+` AND status = ? ORDER BY created_at DESC, id DESC LIMIT 1`,
		org, project, env, StatusSucceeded).Scan(&view)
	if err != nil && !store.IsNoRows(err) {
		return nil, err
	}
	var gv graphView
	_ = json.Unmarshal([]byte(view), &gv)
	out.Sensitive = gv.Sensitive
	outs, err := s.Outputs.Current(ctx, wsID)
	if err != nil {
		return nil, err
	}
	if v, ok := outs["workloads"]; ok {
		_ = unmarshalNumber(v, &out.Workloads)
	}
	if v, ok := outs["resources"]; ok {
		_ = unmarshalNumber(v, &out.Resources)
	}
	if out.Workloads == nil {
		out.Workloads = map[string]map[string]any{}
	}
	if out.Resources == nil {
		out.Resources = map[string]map[string]any{}
	}
	for node, vals := range out.Resources {
		for _, k := range orchestrator.MetadataOutputs {
			if md, ok := vals[k]; ok {
				if md != nil {
					out.Metadata[node] = md
				}
				delete(vals, k)
			}
		}
	}
	out.Shown = showSensitive
	if !showSensitive {
		hide(out.Resources, gv.Sensitive.Resources)
		hide(out.Workloads, gv.Sensitive.Workloads)
	}
	return out, nil
}

func hide(vals map[string]map[string]any, secret map[string][]string) {
	keys := make([]string, 0, len(secret))
	for k := range secret {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, o := range secret[k] {
			if _, ok := vals[k][o]; ok {
				vals[k][o] = HiddenValue
			}
		}
	}
}
