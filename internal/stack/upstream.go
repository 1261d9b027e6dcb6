package stack

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/terracehq/terrace/internal/store"
)

// Linked stacks. A stack publishes values with publish_output blocks
// (evaluated on its deployments' outputs after each successful deployment
// run, kept in stack_published_outputs); another stack of the same
// organization reads them with an upstream_input block naming it by
// <host>/<organization>/<project>/<stack>, and its deployments' inputs use
// upstream_input.<name>.<output>. A change of a published value makes a
// new configuration (the last archive again) in every stack that reads it,
// so their deployments plan with the new value.

// upstreamSource is the stack an upstream_input names.
type upstreamSource struct{ org, project, stack string }

func parseUpstream(source string) (upstreamSource, bool) {
	parts := strings.Split(source, "/")
	if len(parts) < 4 {
		return upstreamSource{}, false
	}
	n := len(parts)
	return upstreamSource{org: parts[n-3], project: parts[n-2], stack: parts[n-1]}, true
}

// recordUpstreams remembers which stacks a completed configuration reads.
func recordUpstreams(ctx context.Context, q store.Q, stackID string, cfg *Config) error {
	if _, err := q.Exec(ctx, `DELETE FROM stack_upstreams WHERE stack_id = ?`, stackID); err != nil {
		return err
	}
	for _, u := range cfg.UpstreamInputs {
		src, ok := parseUpstream(u.Source)
		if !ok {
			continue
		}
		if _, err := q.Exec(ctx, `INSERT INTO stack_upstreams (stack_id, name, organization, project, stack) VALUES (?, ?, ?, ?, ?)`,
			stackID, u.Name, src.org, src.project, src.stack); err != nil {
			return err
		}
	}
	return nil
}

// upstreamValues resolves a configuration's upstream_input blocks to the
// values their stacks publish (an object per input).
func (s *Service) upstreamValues(ctx context.Context, org string, cfg *Config) (map[string]cty.Value, Diagnostics) {
	out := map[string]cty.Value{}
	var diags Diagnostics
	for _, u := range cfg.UpstreamInputs {
		fail := func(detail string) {
			diags = append(diags, fromHCL(hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Upstream stack not available",
				Detail: detail, Subject: u.DeclRange.Ptr()}}, cfg.Sources)...)
		}
		src, ok := parseUpstream(u.Source)
		if !ok || src.org != org {
			fail(fmt.Sprintf("The upstream input %q names %q: an upstream stack must be a stack of this organization (%s).", u.Name, u.Source, org))
			continue
		}
		id, err := s.findStack(ctx, src)
		if err != nil {
			return nil, Diagnostics{{Severity: SeverityError, Summary: "Cannot read upstream stacks", Detail: err.Error()}}
		}
		if id == "" {
			fail(fmt.Sprintf("The upstream input %q names %q, but there is no stack %q in project %q.", u.Name, u.Source, src.stack, src.project))
			continue
		}
		vals, err := s.publishedValues(ctx, s.db, id)
		if err != nil {
			return nil, Diagnostics{{Severity: SeverityError, Summary: "Cannot read upstream stacks", Detail: err.Error()}}
		}
		out[u.Name] = cty.ObjectVal(vals)
	}
	return out, diags
}

// findStack returns the ID of the stack a source names, or "".
func (s *Service) findStack(ctx context.Context, src upstreamSource) (string, error) {
	cands, err := store.All(ctx, s.db, func(sc store.Scanner) ([2]string, error) {
		var p [2]string
		return p, sc.Scan(&p[0], &p[1])
	}, `SELECT id, project_id FROM stacks WHERE organization_name = ? AND name = ? ORDER BY id`, src.org, src.stack)
	if err != nil {
		return "", err
	}
	for _, c := range cands {
		name, err := s.projects.Name(ctx, src.org, c[1])
		if err != nil {
			return "", err
		}
		if name == src.project {
			return c[0], nil
		}
	}
	return "", nil
}

// publishedValues reads what a stack publishes.
// A value published from a sensitive output is marked sensitive, so that
// an input made from it must go to a sensitive variable (compile).
func (s *Service) publishedValues(ctx context.Context, q store.Q, stackID string) (map[string]cty.Value, error) {
	type published struct {
		name, value, typ string
		sensitive        bool
	}
	rows, err := store.All(ctx, q, func(sc store.Scanner) (published, error) {
		var p published
		return p, sc.Scan(&p.name, &p.value, &p.typ, &p.sensitive)
	}, `SELECT name, value, type, sensitive FROM stack_published_outputs WHERE stack_id = ? ORDER BY name`, stackID)
	if err != nil {
		return nil, err
	}
	out := map[string]cty.Value{}
	for _, r := range rows {
		plain, err := s.keys.OpenString(PublishedValueColumn.Purpose, r.value)
		if err != nil {
			return nil, fmt.Errorf("published output %q of stack %s: %w", r.name, stackID, err)
		}
		v, err := decodeJSONValue([]byte(plain), []byte(r.typ))
		if err != nil {
			return nil, fmt.Errorf("published output %q of stack %s: %w", r.name, stackID, err)
		}
		if r.sensitive {
			v = v.Mark(markSensitive)
		}
		out[r.name] = v
	}
	return out, nil
}

func decodeJSONValue(value, typ []byte) (cty.Value, error) {
	ty, err := ctyjson.UnmarshalType(typ)
	if err != nil {
		return cty.NilVal, err
	}
	return ctyjson.Unmarshal(value, ty)
}

// publish evaluates the stack's publish_output blocks after a deployment
// run of r's stack succeeded, stores the values that changed, and makes a
// new configuration in every stack that reads a changed one. A value that
// cannot be evaluated yet (a deployment without the output) keeps its
// last value.
func (s *Service) publish(ctx context.Context, r *DeploymentRun) error {
	if s.exec == nil || s.blobs == nil {
		return nil // nothing runs deployments
	}
	c, err := loadConfig(ctx, s.db, r.ConfigurationID, false)
	if err != nil {
		return err
	}
	st, err := loadStack(ctx, s.db, r.StackID, false)
	if err != nil {
		return err
	}
	cfg, diags := s.parseArchive(ctx, c.blobKey, st.WorkingDirectory)
	if diags.HasErrors() || cfg == nil || len(cfg.PublishOutputs) == 0 {
		return nil
	}
	deployments := map[string]cty.Value{}
	for _, po := range cfg.PublishOutputs {
		for _, tr := range po.Value.Variables() {
			a, ok := attrStep(tr)
			if tr.RootName() != "deployment" || !ok {
				continue
			}
			if _, done := deployments[a.Name]; done {
				continue
			}
			var ws string
			err := s.db.QueryRow(ctx, `SELECT workspace_id FROM stack_deployments WHERE stack_id = ? AND name = ?`, r.StackID, a.Name).Scan(&ws)
			if store.IsNoRows(err) || (err == nil && ws == "") {
				continue
			}
			if err != nil {
				return err
			}
			outs, err := s.exec.Outputs(ctx, r.Organization, ws)
			if err != nil {
				return fmt.Errorf("reading the outputs of deployment %s: %w", a.Name, err)
			}
			vals := map[string]cty.Value{}
			for name, o := range outs {
				v, err := decodeJSONValue(o.Value, o.Type)
				if err != nil {
					return fmt.Errorf("output %q of deployment %s: %w", name, a.Name, err)
				}
				if o.Sensitive {
					v = v.Mark(markSensitive)
				}
				vals[name] = v
			}
			deployments[a.Name] = cty.ObjectVal(vals)
		}
	}
	ectx := &hcl.EvalContext{Variables: map[string]cty.Value{"deployment": cty.ObjectVal(deployments)}, Functions: checkFunctions}
	changed := false
	for _, po := range cfg.PublishOutputs {
		v, d := po.Value.Value(ectx)
		if d.HasErrors() || !v.IsWhollyKnown() {
			continue
		}
		v, marks := v.UnmarkDeep()
		_, sensitive := marks[markSensitive]
		vj, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			return err
		}
		tj, err := ctyjson.MarshalType(v.Type())
		if err != nil {
			return err
		}
		sealed, err := s.keys.SealString(PublishedValueColumn.Purpose, string(vj))
		if err != nil {
			return err
		}
		var oldV, oldT string
		var oldSensitive bool
		err = s.db.QueryRow(ctx, `SELECT value, type, sensitive FROM stack_published_outputs WHERE stack_id = ? AND name = ?`, r.StackID, po.Name).
			Scan(&oldV, &oldT, &oldSensitive)
		if err == nil {
			oldV, err = s.keys.OpenString(PublishedValueColumn.Purpose, oldV)
		}
		switch {
		case store.IsNoRows(err):
			_, err = s.db.Exec(ctx, `INSERT INTO stack_published_outputs (id, stack_id, name, value, type, sensitive, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				r.StackID+"/"+po.Name, r.StackID, po.Name, sealed, string(tj), sensitive, micros(nowUTC()))
		case err != nil:
		case bytes.Equal([]byte(oldV), vj) && bytes.Equal([]byte(oldT), tj) && oldSensitive == sensitive:
			continue
		default:
			_, err = s.db.Exec(ctx, `UPDATE stack_published_outputs SET value = ?, type = ?, sensitive = ?, updated_at = ? WHERE stack_id = ? AND name = ?`,
				sealed, string(tj), sensitive, micros(nowUTC()), r.StackID, po.Name)
		}
		if err != nil {
			return err
		}
		changed = true
	}
	if !changed {
		return nil
	}
	return s.notifyDownstream(ctx, st)
}

// notifyDownstream makes a new configuration, from its last archive, in
// every other stack whose latest configuration reads st.
func (s *Service) notifyDownstream(ctx context.Context, st *Stack) error {
	project, err := s.projects.Name(ctx, st.Organization, st.ProjectID)
	if err != nil {
		return err
	}
	ids, err := store.All(ctx, s.db, func(sc store.Scanner) (string, error) {
		var id string
		return id, sc.Scan(&id)
	}, `SELECT DISTINCT u.stack_id FROM stack_upstreams u JOIN stacks s ON s.id = u.stack_id WHERE u.organization = ? AND u.project = ? AND u.stack = ? AND s.organization_name = ?`,
		st.Organization, project, st.Name, st.Organization)
	if err != nil {
		return err
	}
	sort.Strings(ids)
	for _, id := range ids {
		if id == st.ID {
			continue
		}
		if _, err := s.createConfiguration(ctx, id, ConfigurationOptions{Reuse: true}, "upstream", nil); err != nil {
			s.logger.Warn("making a configuration for a changed upstream stack", "stack", id, "upstream", st.ID, "error", err)
		}
	}
	return nil
}
