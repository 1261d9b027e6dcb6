package ui

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/policy"
)

// Policy sets: an organization's list and a set's page, read-only (sets
// are changed through the API, as with terraform-provider-tfe). Both read
// through the policy service, so the API's check applies: whoever reads
// the organization (its members; not an agent or a run token) reads its
// policy sets. A set's parameters show to those who may manage policies
// (the API lists them to no one else), by key only.

// policyKind names a policy language as HCP Terraform's pages do.
func policyKind(k policy.Kind) string {
	if k == policy.OPA {
		return "OPA"
	}
	return "Sentinel"
}

// policyScope says in words where a set applies: global (minus its
// exclusions), or how many workspaces and projects it names and whether
// tag selectors choose more.
func policyScope(s *policy.Set) string {
	n := func(count int, what string) string {
		if count == 1 {
			return "1 " + what
		}
		return strconv.Itoa(count) + " " + what + "s"
	}
	out := ""
	if s.Global {
		out = "global"
		if c := len(s.Scopes[policy.ScopeWorkspaceExclusion]); c > 0 {
			out += ", " + n(c, "workspace") + " excluded"
		}
		if c := len(s.Scopes[policy.ScopeProjectExclusion]); c > 0 {
			out += ", " + n(c, "project") + " excluded"
		}
		return out
	}
	tags := false
	for _, t := range s.TagSelectors {
		tags = tags || !t.Exclude
	}
	ws, ps := len(s.Scopes[policy.ScopeWorkspace]), len(s.Scopes[policy.ScopeProject])
	if ws == 0 && ps == 0 && !tags {
		return "no workspaces yet"
	}
	out = n(ws, "workspace") + ", " + n(ps, "project")
	if tags {
		out += ", and workspaces its tag selectors match"
	}
	return out
}

// versionView is a policy set version as the pages show it.
type versionView struct {
	ID, Status, Error, Source string
	// Commit is the commit a VCS version was made of (nil: uploaded).
	Commit *policy.Ingress
	// Short is the commit's SHA, shortened.
	Short string
	// When the version reached its status.
	When time.Time
}

func viewVersion(v *policy.Version) *versionView {
	if v == nil {
		return nil
	}
	vv := &versionView{ID: v.ID, Status: v.Status, Error: v.Error, Source: v.Source, Commit: v.Ingress}
	if v.Ingress != nil {
		vv.Short = v.Ingress.CommitSHA[:min(7, len(v.Ingress.CommitSHA))]
	}
	vv.When = v.Timestamps[v.Status+"-at"]
	return vv
}

// setVersions are the current version of a versioned set, and its newest
// when that is another (a version still pending, or refused).
type setVersions struct {
	Current, Newest *versionView
}

func versionsOf(s *policy.Set, vs map[string]*policy.Version) setVersions {
	out := setVersions{Current: viewVersion(vs[s.CurrentVersionID])}
	if s.NewestVersionID != s.CurrentVersionID {
		out.Newest = viewVersion(vs[s.NewestVersionID])
	}
	return out
}

type policySetRow struct {
	S *policy.Set
	setVersions
}

// versionIDs are the current and newest versions of sets (the versions
// their pages show).
func versionIDs(sets ...*policy.Set) []string {
	var ids []string
	for _, s := range sets {
		for _, id := range []string{s.CurrentVersionID, s.NewestVersionID} {
			if id != "" {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

type policySetsData struct {
	Rows   []policySetRow
	Search string
	pager
}

// policySets lists an organization's policy sets.
func (u *UI) policySets(w http.ResponseWriter, r *http.Request) {
	if u.o.Policies == nil {
		u.notFound(w, r)
		return
	}
	ctx := r.Context()
	org := r.PathValue("org")
	q := r.URL.Query()
	d := policySetsData{Search: q.Get("search")}
	sets, pg, err := listPage(q, func(offset, limit int) ([]*policy.Set, int, error) {
		return u.o.Policies.ListSets(ctx, org, d.Search, "", offset, limit)
	})
	d.pager = pg
	if err != nil {
		u.fail(w, r, err)
		return
	}
	vs, err := u.o.Policies.VersionsOf(ctx, org, versionIDs(sets...))
	if err != nil {
		u.fail(w, r, err)
		return
	}
	for _, s := range sets {
		d.Rows = append(d.Rows, policySetRow{S: s, setVersions: versionsOf(s, vs)})
	}
	u.render(w, r, http.StatusOK, "policysets", "Policy sets", org, d)
}

// scopeTarget is a workspace or project a set names: linked when the
// caller may read it, by ID otherwise (as the API's relationships name
// it).
type scopeTarget struct {
	ID, Name, Link string
}

type paramView struct {
	Key       string
	Sensitive bool
}

type policySetData struct {
	S        *policy.Set
	Repo     *policySetRepo
	Policies []policy.SetPolicy
	setVersions
	Workspaces, ExcludedWorkspaces, Projects, ExcludedProjects []scopeTarget
	// Selectors and ExcludingSelectors are tag selectors, as key or
	// key=value.
	Selectors, ExcludingSelectors []string
	// Params are the set's parameters, keys only (ShowParams: the caller
	// may manage policies, who alone lists them).
	Params     []paramView
	ShowParams bool
}

// policySetRepo is a VCS-backed set's repository.
type policySetRepo struct {
	Identifier, URL, Provider, Branch string
}

// policySet shows a policy set: its attributes, the policies it
// evaluates, where it applies and, for a versioned set, its versions.
func (u *UI) policySet(w http.ResponseWriter, r *http.Request) {
	if u.o.Policies == nil {
		u.notFound(w, r)
		return
	}
	ctx := r.Context()
	org, id := r.PathValue("org"), r.PathValue("id")
	s, err := u.o.Policies.Set(ctx, id)
	if err == nil && s.Organization != org {
		err = core.NotFound("policy set %q not found", id)
	}
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d := policySetData{S: s}
	if s.VCSRepo != nil {
		d.Repo = &policySetRepo{Identifier: s.VCSRepo.DisplayIdentifier, URL: s.VCSRepo.RepositoryHTTPURL, Provider: s.VCSRepo.ServiceProvider, Branch: s.VCSRepo.Branch}
		if d.Repo.Identifier == "" {
			d.Repo.Identifier = s.VCSRepo.Identifier
		}
	}
	content, err := u.o.Policies.SetContent(ctx, s)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d.Policies, d.setVersions = content.Policies, versionsOf(s, content.Versions)
	for _, scope := range []struct {
		kind string
		to   *[]scopeTarget
		ws   bool
	}{
		{policy.ScopeWorkspace, &d.Workspaces, true},
		{policy.ScopeWorkspaceExclusion, &d.ExcludedWorkspaces, true},
		{policy.ScopeProject, &d.Projects, false},
		{policy.ScopeProjectExclusion, &d.ExcludedProjects, false},
	} {
		for _, tid := range s.Scopes[scope.kind] {
			var t scopeTarget
			if scope.ws {
				t, err = u.workspaceTarget(ctx, org, tid)
			} else {
				t, err = u.projectTarget(ctx, org, tid)
			}
			if err != nil {
				u.fail(w, r, err)
				return
			}
			*scope.to = append(*scope.to, t)
		}
	}
	for _, t := range s.TagSelectors {
		text := t.Key
		if t.Value != nil && *t.Value != "" {
			text += "=" + *t.Value
		}
		if t.Exclude {
			d.ExcludingSelectors = append(d.ExcludingSelectors, text)
		} else {
			d.Selectors = append(d.Selectors, text)
		}
	}
	if allowed(ctx, authz.OrgManagePolicies, authz.Resource{Organization: org}) {
		ps, err := u.o.Policies.Parameters(ctx, s.ID)
		if err != nil {
			u.fail(w, r, err)
			return
		}
		d.ShowParams = true
		for _, p := range ps {
			d.Params = append(d.Params, paramView{Key: p.Key, Sensitive: p.Sensitive})
		}
	}
	u.render(w, r, http.StatusOK, "policyset", "Policy set "+s.Name, org, d)
}

// workspaceTarget names a workspace a set names, linking to its page when
// the caller may read it.
func (u *UI) workspaceTarget(ctx context.Context, org, id string) (scopeTarget, error) {
	t := scopeTarget{ID: id}
	ws, err := u.o.Workspaces.Get(ctx, id)
	if core.KindOf(err) == core.KindNotFound {
		return t, nil
	}
	if err != nil {
		return t, err
	}
	if ws.Organization == org && allowed(ctx, authz.WorkspaceRead, authz.Resource{Organization: org, ProjectID: ws.ProjectID, WorkspaceID: ws.ID}) {
		t.Name, t.Link = ws.Name, orgPath(org, "workspaces", ws.Name)
	}
	return t, nil
}

// projectTarget names a project a set names, linking to its workspaces
// (as the projects page does) when the caller may read it.
func (u *UI) projectTarget(ctx context.Context, org, id string) (scopeTarget, error) {
	t := scopeTarget{ID: id}
	if u.o.Projects == nil {
		return t, nil
	}
	p, err := u.o.Projects.Get(ctx, id)
	if core.KindOf(err) == core.KindNotFound {
		return t, nil
	}
	if err != nil {
		return t, err
	}
	if p.Organization == org && allowed(ctx, authz.ProjectRead, authz.Resource{Organization: org, ProjectID: p.ID}) {
		t.Name, t.Link = p.Name, orgPath(org, "workspaces")+"?project="+url.QueryEscape(p.ID)
	}
	return t, nil
}
