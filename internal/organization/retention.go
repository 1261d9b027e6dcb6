package organization

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/retention"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// SetDataRetention sets the organization's data retention policy, which
// its workspaces without one of their own are under (the zero Policy
// removes it). Owners (OrgManage).
func (s *Service) SetDataRetention(ctx context.Context, name string, p retention.Policy) (*Organization, error) {
	if err := auth.CheckOrganization(ctx, name); err != nil {
		return nil, err
	}
	if err := authz.Allows(ctx, authz.OrgManage, authz.Resource{Organization: name}); err != nil {
		return nil, err
	}
	var org *Organization
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		if org, err = s.get(ctx, tx, name, true); err != nil {
			return err
		}
		org.Settings.DataRetention = p
		org.UpdatedAt = core.Now()
		settings, _ := json.Marshal(org.Settings)
		_, err = tx.Exec(ctx, `UPDATE organizations SET attrs = ?, updated_at = ? WHERE id = ?`, string(settings), core.Micros(org.UpdatedAt), org.ID)
		return err
	})
	return org, err
}

// DataRetentionPolicies returns the organizations that have a data
// retention policy, each with it: for the retention enforcer. No access
// check.
func (s *Service) DataRetentionPolicies(ctx context.Context) (map[string]retention.Policy, error) {
	orgs, err := store.All(ctx, s.db, scan, `SELECT `+cols+` FROM organizations WHERE attrs LIKE ?`+store.LikeEscape, store.LikeJSONKey("data-retention-policy"))
	if err != nil {
		return nil, err
	}
	out := map[string]retention.Policy{}
	for _, o := range orgs {
		if !o.Settings.DataRetention.None() {
			out[o.Name] = o.Settings.DataRetention
		}
	}
	return out, nil
}

// The organization's data-retention-policy relationship (Terraform
// Enterprise's): read by its members, set and removed by its owners.
func (a *API) readRetention(w http.ResponseWriter, r *http.Request) {
	org, err := a.Service.Get(r.Context(), r.PathValue("org"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	retention.Respond(w, r, http.StatusOK, org.Settings.DataRetention, "organization "+org.Name)
}

func (a *API) setRetention(w http.ResponseWriter, r *http.Request) {
	org, err := a.Service.Get(r.Context(), r.PathValue("org"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	retention.Set(w, r, org.Settings.DataRetention, "organization "+org.Name, func(p retention.Policy) (retention.Policy, error) {
		org, err := a.Service.SetDataRetention(r.Context(), org.Name, p)
		if err != nil {
			return retention.Policy{}, err
		}
		return org.Settings.DataRetention, nil
	})
}

func (a *API) deleteRetention(w http.ResponseWriter, r *http.Request) {
	_, err := a.Service.SetDataRetention(r.Context(), r.PathValue("org"), retention.Policy{})
	tfeapi.NoContent(w, r, err)
}
