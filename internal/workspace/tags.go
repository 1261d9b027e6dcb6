package workspace

import (
	"context"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/store"
)

// MaxTagBindings is the most tag bindings one workspace may carry.
const MaxTagBindings = 10

// addTags attaches tags (found or created by name, or found by ID in the
// workspace's organization) to w.
func (s *Service) addTags(ctx context.Context, q store.Q, w *Workspace, refs []TagRef) error {
	now := core.Micros(core.Now())
	for i, ref := range refs {
		var tagID string
		switch {
		case ref.ID != "":
			err := q.QueryRow(ctx, `SELECT id FROM tags WHERE id = ? AND organization_name = ?`, ref.ID, w.Organization).Scan(&tagID)
			if store.IsNoRows(err) {
				return core.NotFound("tag %q not found", ref.ID)
			}
			if err != nil {
				return err
			}
		case ref.Name != "":
			name, err := NormalizeTag(ref.Name)
			if err != nil {
				return err
			}
			err = q.QueryRow(ctx, `SELECT id FROM tags WHERE organization_name = ? AND name = ?`, w.Organization, name).Scan(&tagID)
			if store.IsNoRows(err) {
				tagID = core.NewID(core.PrefixTag)
				if _, err := q.Exec(ctx, `INSERT INTO tags (id, organization_name, name, created_at) VALUES (?, ?, ?, ?)`, tagID, w.Organization, name, now); err != nil {
					return err
				}
			} else if err != nil {
				return err
			}
		default:
			return core.Invalid("a tag must have a name or an id")
		}
		var n int
		if err := q.QueryRow(ctx, `SELECT COUNT(*) FROM workspace_tags WHERE workspace_id = ? AND tag_id = ?`, w.ID, tagID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			continue
		}
		if _, err := q.Exec(ctx, `INSERT INTO workspace_tags (workspace_id, tag_id, created_at) VALUES (?, ?, ?)`, w.ID, tagID, now+int64(i)); err != nil {
			return err
		}
	}
	return nil
}

// Tags returns a workspace's tags.
func (s *Service) Tags(ctx context.Context, id string) ([]Tag, error) {
	w, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `SELECT t.id, t.name FROM workspace_tags wt JOIN tags t ON t.id = wt.tag_id WHERE wt.workspace_id = ? ORDER BY wt.created_at, t.name`, w.ID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Tag{}
	for rows.Next() {
		var t Tag
		if err := rows.Scan(&t.ID, &t.Name); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// AddTags attaches tags to a workspace.
func (s *Service) AddTags(ctx context.Context, id string, refs []TagRef) error {
	if len(refs) == 0 {
		return core.Invalid("at least one tag is required")
	}
	return s.checkedTx(ctx, id, requireManageWorkspace, func(tx *store.Tx, w *Workspace) error {
		return s.addTags(ctx, tx, w, refs)
	})
}

// RemoveTags detaches tags from a workspace; unknown tags are ignored.
func (s *Service) RemoveTags(ctx context.Context, id string, refs []TagRef) error {
	if len(refs) == 0 {
		return core.Invalid("at least one tag is required")
	}
	return s.checkedTx(ctx, id, requireManageWorkspace, func(tx *store.Tx, w *Workspace) error {
		for _, ref := range refs {
			tagID := ref.ID
			if tagID == "" {
				err := tx.QueryRow(ctx, `SELECT id FROM tags WHERE organization_name = ? AND name = ?`, w.Organization, strings.ToLower(strings.TrimSpace(ref.Name))).Scan(&tagID)
				if store.IsNoRows(err) {
					continue
				}
				if err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, `DELETE FROM workspace_tags WHERE workspace_id = ? AND tag_id = ?`, w.ID, tagID); err != nil {
				return err
			}
		}
		return nil
	})
}

// OrgTag is an organization tag with the number of workspaces carrying it.
type OrgTag struct {
	Tag
	InstanceCount int
}

// OrganizationTags lists an organization's tags by name, optionally
// filtered by a name substring (q) and excluding those on one workspace:
// at most limit (all when negative) from offset on, and how many match in
// all. The store filters and pages them; the page's tags are counted.
func (s *Service) OrganizationTags(ctx context.Context, org, query, excludeWorkspace string, offset, limit int) ([]OrgTag, int, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return nil, 0, err
	}
	where := `t.organization_name = ?`
	args := []any{org}
	if q := strings.ToLower(query); q != "" {
		where += ` AND t.name LIKE ?` + store.LikeEscape
		args = append(args, "%"+store.EscapeLike(q)+"%")
	}
	if excludeWorkspace != "" {
		where += ` AND t.id NOT IN (SELECT tag_id FROM workspace_tags WHERE workspace_id = ?)`
		args = append(args, excludeWorkspace)
	}
	return store.Page(ctx, s.db, func(sc store.Scanner) (OrgTag, error) {
		var t OrgTag
		return t, sc.Scan(&t.ID, &t.Name, &t.InstanceCount)
	}, `t.id, t.name, (SELECT COUNT(*) FROM workspace_tags wt WHERE wt.tag_id = t.id)`, `tags t`, where, `t.name, t.id`, offset, limit, args...)
}

// MaxTagIDs bounds the tags or workspaces one organization tags request
// names.
const MaxTagIDs = 100

// tagRow reads a tag without looking at the caller, locking its row in a
// transaction.
func tagRow(ctx context.Context, q store.Q, id string) (Tag, string, error) {
	var t Tag
	var org string
	if !core.HasPrefix(id, core.PrefixTag) {
		return t, "", core.NotFound("tag %q not found", id)
	}
	err := q.QueryRow(ctx, `SELECT id, name, organization_name FROM tags WHERE id = ?`+store.ForUpdate(q), id).Scan(&t.ID, &t.Name, &org)
	if store.IsNoRows(err) {
		return t, "", core.NotFound("tag %q not found", id)
	}
	return t, org, err
}

// loadTag reads a tag of an organization the caller may see (404
// otherwise).
func (s *Service) loadTag(ctx context.Context, id string) (Tag, string, error) {
	t, org, err := tagRow(ctx, s.db, id)
	if err != nil {
		return t, "", err
	}
	if err := authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: org}); err != nil {
		return t, "", core.NotFoundAs(err, "tag %q not found", id)
	}
	return t, org, nil
}

// TagOrganization returns the organization of a tag the caller may see.
func (s *Service) TagOrganization(ctx context.Context, id string) (string, error) {
	_, org, err := s.loadTag(ctx, id)
	return org, err
}

// DeleteOrganizationTags deletes tags of org, taking them off every
// workspace that carries them, in one transaction: all or nothing. Each
// such workspace must be one the caller may change (WorkspaceUpdate), as
// taking a tag off it through the workspace would need; tags not in org
// are not found. The model decides before the transaction (it reads the
// store); the caller manages workspaces (authz.OrgManageTags), which a
// workspace tagged in between does not escape.
func (s *Service) DeleteOrganizationTags(ctx context.Context, org string, ids []string) error {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return err
	}
	if len(ids) == 0 {
		return core.Invalid("at least one tag ID is required")
	}
	if len(ids) > MaxTagIDs {
		return core.Invalid("at most %d tags may be deleted at once", MaxTagIDs)
	}
	if err := authz.Allows(ctx, authz.OrgManageTags, authz.Resource{Organization: org}); err != nil {
		return err
	}
	// Decided once: who manages org's tags sees org, and a tag of another
	// organization is not found in org whoever asks (loadTag would ask
	// the model again for every tag). The tags, their carriers and the
	// deletion take a statement each however many tags are named.
	for _, id := range ids {
		if !core.HasPrefix(id, core.PrefixTag) {
			return core.NotFound("tag %q not found in organization %q", id, org)
		}
	}
	in, args := store.In(ids)
	orgs, err := store.Pairs(ctx, s.db, `SELECT id, organization_name FROM tags WHERE id IN (`+in+`)`, args...)
	if err != nil {
		return err
	}
	if err := allTagsOf(org, ids, orgs); err != nil {
		return err
	}
	carriers, err := store.All(ctx, s.db, func(sc store.Scanner) (*Workspace, error) {
		w := &Workspace{Organization: org}
		return w, sc.Scan(&w.ID, &w.ProjectID)
	}, `SELECT DISTINCT w.id, w.project_id FROM workspace_tags wt JOIN workspaces w ON w.id = wt.workspace_id WHERE wt.tag_id IN (`+in+`) ORDER BY w.id`, args...)
	if err != nil {
		return err
	}
	for _, w := range carriers {
		if err := requireManageWorkspace(ctx, w); err != nil {
			return err
		}
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		orgs, err := store.Pairs(ctx, tx, `SELECT id, organization_name FROM tags WHERE id IN (`+in+`)`+store.ForUpdate(tx), args...)
		if err != nil {
			return err
		}
		if err := allTagsOf(org, ids, orgs); err != nil { // one deleted meanwhile
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM workspace_tags WHERE tag_id IN (`+in+`)`, args...); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM tags WHERE id IN (`+in+`)`, args...)
		return err
	})
}

// allTagsOf is nil when found, the (tag, organization) rows read for ids,
// holds every one of ids, each in org; otherwise the first of ids that is
// not is not found.
func allTagsOf(org string, ids []string, found [][2]string) error {
	orgOf := make(map[string]string, len(found))
	for _, p := range found {
		orgOf[p[0]] = p[1]
	}
	for _, id := range ids {
		if orgOf[id] != org {
			return core.NotFound("tag %q not found in organization %q", id, org)
		}
	}
	return nil
}

// AddTagToWorkspaces puts a tag on workspaces of its organization, in one
// transaction: each must be one the caller may change (WorkspaceUpdate,
// as adding the tag through the workspace needs), else nothing changes.
func (s *Service) AddTagToWorkspaces(ctx context.Context, tagID string, workspaceIDs []string) error {
	if len(workspaceIDs) == 0 {
		return core.Invalid("at least one workspace is required")
	}
	if len(workspaceIDs) > MaxTagIDs {
		return core.Invalid("at most %d workspaces may be tagged at once", MaxTagIDs)
	}
	t, org, err := s.loadTag(ctx, tagID)
	if err != nil {
		return err
	}
	// The model decides before the transaction, which then only checks
	// that every row is still there and where it was.
	for _, id := range workspaceIDs {
		w, err := s.Get(ctx, id)
		if err == nil && w.Organization != org {
			err = core.NotFound("workspace %q not found in organization %q", id, org)
		}
		if err != nil {
			return err
		}
		if err := requireManageWorkspace(ctx, w); err != nil {
			return err
		}
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		if _, _, err := tagRow(ctx, tx, t.ID); err != nil {
			return err
		}
		for _, id := range workspaceIDs {
			w, err := s.loadUnchecked(ctx, tx, id, true)
			if err == nil && w.Organization != org {
				err = core.NotFound("workspace %q not found in organization %q", id, org)
			}
			if err != nil {
				return err
			}
			if err := s.addTags(ctx, tx, w, []TagRef{{ID: t.ID}}); err != nil {
				return err
			}
		}
		return nil
	})
}

func validateBindings(bs []TagBinding) error {
	if len(bs) > MaxTagBindings {
		return core.Invalid("tag bindings cannot exceed %d bindings per resource", MaxTagBindings)
	}
	for _, b := range bs {
		if !project.ValidTagKey(b.Key) {
			return core.Invalid("tag binding key %q is invalid: a key is %s", b.Key, project.TagKeyRule)
		}
		if !project.ValidTagValue(b.Value) {
			return core.Invalid("tag binding value %q of key %q is invalid: a value is %s", b.Value, b.Key, project.TagValueRule)
		}
	}
	return nil
}

// addBindings adds bindings to w or changes the values of existing keys;
// none may override a binding its project holds of a key reserved with
// overrides disabled.
func (s *Service) addBindings(ctx context.Context, q store.Q, w *Workspace, bs []TagBinding) error {
	if err := validateBindings(bs); err != nil {
		return err
	}
	if err := s.checkOverrides(ctx, q, w, bs); err != nil {
		return err
	}
	workspaceID := w.ID
	now := core.Micros(core.Now())
	for i, b := range bs {
		res, err := q.Exec(ctx, `UPDATE workspace_tag_bindings SET tag_value = ? WHERE workspace_id = ? AND tag_key = ?`, b.Value, workspaceID, b.Key)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			continue
		}
		if _, err := q.Exec(ctx, `INSERT INTO workspace_tag_bindings (id, workspace_id, tag_key, tag_value, created_at) VALUES (?, ?, ?, ?, ?)`,
			core.NewID(core.PrefixTagBinding), workspaceID, b.Key, b.Value, now+int64(i)); err != nil {
			return err
		}
	}
	var n int
	if err := q.QueryRow(ctx, `SELECT COUNT(*) FROM workspace_tag_bindings WHERE workspace_id = ?`, workspaceID).Scan(&n); err != nil {
		return err
	}
	if n > MaxTagBindings {
		return core.Invalid("tag bindings cannot exceed %d bindings per resource", MaxTagBindings)
	}
	return nil
}

func (s *Service) bindings(ctx context.Context, q store.Q, workspaceID string) ([]TagBinding, error) {
	rows, err := q.Query(ctx, `SELECT id, tag_key, tag_value FROM workspace_tag_bindings WHERE workspace_id = ? ORDER BY created_at, tag_key`, workspaceID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []TagBinding{}
	for rows.Next() {
		var b TagBinding
		if err := rows.Scan(&b.ID, &b.Key, &b.Value); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// TagBindings returns a workspace's own tag bindings.
func (s *Service) TagBindings(ctx context.Context, id string) ([]TagBinding, error) {
	w, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.bindings(ctx, s.db, w.ID)
}

// AddTagBindings adds bindings to a workspace (or changes values of
// existing keys) and returns all its bindings.
func (s *Service) AddTagBindings(ctx context.Context, id string, bs []TagBinding) ([]TagBinding, error) {
	err := s.checkedTx(ctx, id, requireManageWorkspace, func(tx *store.Tx, w *Workspace) error {
		return s.addBindings(ctx, tx, w, bs)
	})
	if err != nil {
		return nil, err
	}
	return s.TagBindings(ctx, id)
}

// EffectiveBinding is a binding with where it comes from.
type EffectiveBinding struct {
	TagBinding
	InheritedFrom string // project ID, "" for the workspace's own
}

// EffectiveTagBindings returns the project's bindings overridden by the
// workspace's own, except for keys reserved with overrides disabled: of
// those the project's binding holds (a workspace binding written before
// the key was locked, or before the project bound it, is set aside).
func (s *Service) EffectiveTagBindings(ctx context.Context, id string) ([]EffectiveBinding, error) {
	w, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.effectiveBindings(ctx, s.db, w)
}

// SystemEffectiveTagBindingsIn is EffectiveTagBindings without checking
// the caller, reading through q (the caller's transaction when it has
// one): for the policy domain, which matches policy set tag selectors
// against them when it chooses a run's sets.
func (s *Service) SystemEffectiveTagBindingsIn(ctx context.Context, q store.Q, id string) ([]EffectiveBinding, error) {
	w, err := s.loadUnchecked(ctx, q, id, false)
	if err != nil {
		return nil, err
	}
	return s.effectiveBindings(ctx, q, w)
}

func (s *Service) effectiveBindings(ctx context.Context, q store.Q, w *Workspace) ([]EffectiveBinding, error) {
	own, err := s.bindings(ctx, q, w.ID)
	if err != nil {
		return nil, err
	}
	locked, err := lockedKeys(ctx, q, w.Organization)
	if err != nil {
		return nil, err
	}
	var out []EffectiveBinding
	ownKeys := map[string]bool{}
	for _, b := range own {
		ownKeys[b.Key] = true
	}
	inherited := map[string]bool{}
	if p, err := s.projectInfoIn(ctx, q, w.ProjectID); err == nil {
		for _, b := range p.TagBindings {
			if !ownKeys[b.Key] || locked[b.Key] {
				inherited[b.Key] = true
				out = append(out, EffectiveBinding{TagBinding: b, InheritedFrom: p.ID})
			}
		}
	}
	for _, b := range own {
		if !inherited[b.Key] {
			out = append(out, EffectiveBinding{TagBinding: b})
		}
	}
	return out, nil
}

// Consumers returns the workspaces allowed to read w's state. With
// project-remote-state, only those in w's project are listed.
func (s *Service) Consumers(ctx context.Context, id string) ([]*Workspace, error) {
	w, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `SELECT consumer_id FROM remote_state_consumers c JOIN workspaces w ON w.id = c.consumer_id WHERE c.workspace_id = ? ORDER BY w.name`, w.ID)
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var cid string
		if err := rows.Scan(&cid); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, cid)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := []*Workspace{}
	for _, cid := range ids {
		c, err := s.Get(ctx, cid)
		if err != nil {
			continue
		}
		if w.Settings.ProjectRemoteState && c.ProjectID != w.ProjectID {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// ChangeConsumers adds (op "add"), removes ("remove") or replaces
// ("replace") the consumers of w's state. Consumers must be workspaces of
// the same organization.
func (s *Service) ChangeConsumers(ctx context.Context, id, op string, consumerIDs []string) error {
	if len(consumerIDs) == 0 && op != "replace" {
		return core.Invalid("at least one workspace is required")
	}
	return s.checkedTx(ctx, id, requireManageWorkspace, func(tx *store.Tx, w *Workspace) error {
		for _, cid := range consumerIDs {
			if cid == w.ID && op != "remove" {
				return core.Invalid("a workspace cannot be its own remote state consumer")
			}
			var org string
			err := tx.QueryRow(ctx, `SELECT organization_name FROM workspaces WHERE id = ?`, cid).Scan(&org)
			if store.IsNoRows(err) || (err == nil && org != w.Organization) {
				return core.NotFound("workspace %q not found", cid)
			}
			if err != nil {
				return err
			}
		}
		if op == "replace" {
			if _, err := tx.Exec(ctx, `DELETE FROM remote_state_consumers WHERE workspace_id = ?`, w.ID); err != nil {
				return err
			}
		}
		for _, cid := range consumerIDs {
			if _, err := tx.Exec(ctx, `DELETE FROM remote_state_consumers WHERE workspace_id = ? AND consumer_id = ?`, w.ID, cid); err != nil {
				return err
			}
			if op == "remove" {
				continue
			}
			if _, err := tx.Exec(ctx, `INSERT INTO remote_state_consumers (workspace_id, consumer_id) VALUES (?, ?)`, w.ID, cid); err != nil {
				return err
			}
		}
		return nil
	})
}

// CanReadStateOf reports whether workspace reader may read the state of
// workspace target: the same workspace, a target sharing globally or
// with its project (when reader is in it), or reader listed as a consumer.
// Both must be in the same organization. It does not check the caller.
func (s *Service) CanReadStateOf(ctx context.Context, readerWorkspaceID, targetWorkspaceID string) (bool, error) {
	if readerWorkspaceID == targetWorkspaceID {
		return true, nil
	}
	reader, err := scan(s.db.QueryRow(ctx, `SELECT `+cols+` FROM workspaces WHERE id = ?`, readerWorkspaceID))
	if store.IsNoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	target, err := scan(s.db.QueryRow(ctx, `SELECT `+cols+` FROM workspaces WHERE id = ?`, targetWorkspaceID))
	if store.IsNoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if reader.Organization != target.Organization {
		return false, nil
	}
	if target.Settings.GlobalRemoteState {
		return true, nil
	}
	if target.Settings.ProjectRemoteState && reader.ProjectID == target.ProjectID {
		return true, nil
	}
	var n int
	if err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM remote_state_consumers WHERE workspace_id = ? AND consumer_id = ?`, targetWorkspaceID, readerWorkspaceID).Scan(&n); err != nil {
		return false, err
	}
	return n > 0, nil
}
