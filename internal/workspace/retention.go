package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/retention"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// SetDataRetention sets the workspace's own data retention policy (the
// zero Policy removes it: the organization's applies). Workspace admins
// (WorkspaceUpdate).
func (s *Service) SetDataRetention(ctx context.Context, id string, p retention.Policy) (*Workspace, error) {
	pre, err := s.load(ctx, s.db, id, false)
	if err != nil {
		return nil, err
	}
	if err := requireManageWorkspace(ctx, pre); err != nil {
		return nil, err
	}
	var w *Workspace
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		if w, err = s.loadUnchecked(ctx, tx, id, true); err != nil {
			return err
		}
		w.Settings.DataRetention = p
		w.UpdatedAt = core.Now()
		attrs, _ := json.Marshal(w.Settings)
		_, err = tx.Exec(ctx, `UPDATE workspaces SET attrs = ?, updated_at = ? WHERE id = ?`, string(attrs), core.Micros(w.UpdatedAt), w.ID)
		return err
	})
	return w, err
}

// DataRetentionPolicies lists the workspaces that may be under a data
// retention policy, each with its own (none for most): those of the
// organizations named (which have one) and those with a policy of their
// own. For the retention enforcer, which applies the organization's where
// a workspace has none. No access check.
func (s *Service) DataRetentionPolicies(ctx context.Context, orgs []string) ([]retention.Workspace, error) {
	query, args := `SELECT id, organization_name, attrs FROM workspaces WHERE attrs LIKE ?`+store.LikeEscape, []any{store.LikeJSONKey("data-retention-policy")}
	if len(orgs) > 0 {
		in, orgArgs := store.In(orgs)
		query, args = query+` OR organization_name IN (`+in+`)`, append(args, orgArgs...)
	}
	return store.All(ctx, s.db, func(sc store.Scanner) (retention.Workspace, error) {
		var w retention.Workspace
		var attrs string
		if err := sc.Scan(&w.ID, &w.Organization, &attrs); err != nil {
			return w, err
		}
		var own struct {
			Policy retention.Policy `json:"data-retention-policy"`
		}
		if err := json.Unmarshal([]byte(attrs), &own); err != nil {
			return w, fmt.Errorf("decoding the settings of workspace %s: %w", w.ID, err)
		}
		w.Own = own.Policy
		return w, nil
	}, query+` ORDER BY id`, args...)
}

// The workspace's data-retention-policy relationship (Terraform
// Enterprise's): read by whoever reads the workspace, set and removed by
// its admins.
func (a *API) readRetention(w http.ResponseWriter, r *http.Request, ws *Workspace) {
	retention.Respond(w, r, http.StatusOK, ws.Settings.DataRetention, "workspace "+ws.ID)
}

func (a *API) setRetention(w http.ResponseWriter, r *http.Request, ws *Workspace) {
	retention.Set(w, r, ws.Settings.DataRetention, "workspace "+ws.ID, func(p retention.Policy) (retention.Policy, error) {
		ws, err := a.Service.SetDataRetention(r.Context(), ws.ID, p)
		if err != nil {
			return retention.Policy{}, err
		}
		return ws.Settings.DataRetention, nil
	})
}

func (a *API) deleteRetention(w http.ResponseWriter, r *http.Request, ws *Workspace) {
	_, err := a.Service.SetDataRetention(r.Context(), ws.ID, retention.Policy{})
	tfeapi.NoContent(w, r, err)
}
