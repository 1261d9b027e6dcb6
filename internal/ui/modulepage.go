package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"html/template"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/moduletest"
	"github.com/terracehq/terrace/internal/registry"
)

// A private module's page (HCP Terraform's module page, without the
// README): where the module comes from, its versions and, for the one
// chosen, the block that calls it, its inputs, outputs, provider
// dependencies and resources. It reads what the API's module routes read,
// through the same service calls and so the same decisions: the module
// and its versions as GET .../registry-modules/{registry}/{ns}/{name}/{provider}
// and .../version read them (the model's OrgRead).

// registerModulePages adds the module page's route.
func (u *UI) registerModulePages(mux *http.ServeMux) {
	mux.HandleFunc("GET /app/{org}/registry/modules/private/{ns}/{name}/{provider}", u.modulePage)
}

// modulePagePath is the page of organization org's private module
// name/provider (a private module's namespace is its organization).
func modulePagePath(m *registry.Module) string {
	return orgPath(m.Organization, "registry", "modules", "private", m.Namespace, m.Name, m.Provider)
}

// mayProvision tells whether the caller may provision a no-code module's
// workspace in some project of org: the provision form offers only those
// projects (provisionProjects) and asks again for the one chosen, so with
// none the Provision link would only lead to a 403.
func (u *UI) mayProvision(ctx context.Context, org string) (bool, error) {
	ps, _, err := u.provisionProjects(ctx, org, "")
	return len(ps) > 0, err
}

// versionState is a version's status as the page says it: ok (terraform
// is offered it), failed (its archive or commit was refused, Error says
// why) or pending (nothing checked yet).
func versionState(s registry.VersionStatus) string {
	switch s {
	case registry.VersionOK:
		return "ok"
	case registry.VersionRegIngressFailed, registry.VersionCloneFailed:
		return "failed"
	}
	return "pending"
}

// stateClass is the style of a versionState.
func stateClass(state string) string {
	switch state {
	case "ok":
		return "ok"
	case "failed":
		return "bad"
	}
	return "wait"
}

// moduleStatusClass is the style of a module's status.
func moduleStatusClass(s registry.ModuleStatus) string {
	switch s {
	case registry.ModuleSetupComplete:
		return "ok"
	case registry.ModulePending:
		return "wait"
	}
	return "bad"
}

type moduleVersionRow struct {
	V        *registry.Version
	State    string
	Selected bool
}

func (r moduleVersionRow) Class() string { return stateClass(r.State) }

// From says where the version's archive came from: uploaded through the
// API, or the commit of the VCS provider it was fetched at.
func (r moduleVersionRow) From() string {
	if r.V.Source == "" || r.V.Source == "tfe-api" {
		return "uploaded"
	}
	from := r.V.Source
	if c := r.V.CommitSHA; c != "" {
		from += " at " + c[:min(len(c), 12)]
	}
	return from
}

// moduleInput is an input variable as the page shows it. A sensitive
// one's default never reaches the template (moduleInputs drops it).
type moduleInput struct {
	registry.Variable
}

// DefaultJSON is the default as compact JSON ("" for a required or
// sensitive input).
func (i moduleInput) DefaultJSON() string {
	if i.Required || i.Sensitive || len(i.Default) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, i.Default) != nil {
		return string(i.Default)
	}
	return b.String()
}

// moduleInputs are vars required first, each group in declaration order,
// without the defaults of sensitive ones.
func moduleInputs(vars []registry.Variable) []moduleInput {
	out := make([]moduleInput, 0, len(vars))
	for _, v := range vars {
		if v.Sensitive {
			v.Default = nil
		}
		out = append(out, moduleInput{Variable: v})
	}
	slices.SortStableFunc(out, func(a, b moduleInput) int {
		switch {
		case a.Required == b.Required:
			return 0
		case a.Required:
			return -1
		}
		return 1
	})
	return out
}

// moduleSourceHost is the host a module source names this server by, and
// a note when it is not hostname as configured. terraform accepts a module
// registry host only with a dot in its name (terraform-registry-address's
// ParseModuleSource): localhost becomes 127.0.0.1, which the server's
// generated certificate covers too (see the README); another name without
// a dot is kept, and the note says terraform refuses it.
func moduleSourceHost(hostname string) (host, note string) {
	name, port, err := net.SplitHostPort(hostname)
	if err != nil {
		name, port = hostname, ""
	}
	if strings.Contains(name, ".") {
		return hostname, ""
	}
	if strings.EqualFold(name, "localhost") {
		host = "127.0.0.1"
		if port != "" {
			host = net.JoinHostPort(host, port)
		}
		return host, "terraform accepts a module registry host only with a dot in its name: the source names this server (" + hostname + ") by its IP address, " + host + "."
	}
	return hostname, "terraform accepts a module registry host only with a dot in its name, and refuses " + hostname + ": give the server a --hostname with a dot (a domain, or an IP address)."
}

// moduleLocalName is the name the block gives the module: the module's,
// made a valid terraform name when it starts with a digit.
func moduleLocalName(name string) string {
	if name != "" && name[0] >= '0' && name[0] <= '9' {
		return "_" + name
	}
	return name
}

// moduleUsage is the block that calls version of module m from this
// registry: its source HOST/ORG/NAME/PROVIDER (the organization's current
// name, under which modules.v1 serves it), the version pinned, and a line
// to fill in for each required input (a group of its own, aligned as
// terraform fmt aligns it).
func moduleUsage(host string, m *registry.Module, version string, inputs []moduleInput) string {
	var b strings.Builder
	b.WriteString(`module "` + moduleLocalName(m.Name) + `" {` + "\n")
	b.WriteString(`  source  = "` + host + "/" + m.Organization + "/" + m.Name + "/" + m.Provider + `"` + "\n")
	b.WriteString(`  version = "` + version + `"` + "\n")
	width := 0
	for _, in := range inputs {
		if in.Required {
			width = max(width, len(in.Name))
		}
	}
	if width > 0 {
		b.WriteString("\n")
		for _, in := range inputs {
			if in.Required {
				b.WriteString("  " + in.Name + strings.Repeat(" ", width-len(in.Name)) + " = ...\n")
			}
		}
	}
	b.WriteString("}")
	return b.String()
}

type modulePageData struct {
	Module      *registry.Module
	Status      registry.ModuleStatus
	StatusClass string
	Path        string
	Versions    []moduleVersionRow
	// Selected is the version shown (nil: the module has none), in
	// state SelectedState; Inspection is what an ok one declares.
	Selected      *registry.Version
	SelectedState string
	Inspection    *registry.Inspection
	// Usage is the block that calls the version; SourceHost the host
	// its source names (which terraform login is given), HostNote why
	// it is not the server's hostname as configured.
	Usage, SourceHost, HostNote string
	// Inputs are the version's inputs, required first.
	Inputs []moduleInput
	// Readme is the version's README, rendered ("" without one).
	Readme template.HTML
	// NoCode is the module's no-code module ID ("" when it has none);
	// Provision: the caller may provision its workspaces somewhere.
	NoCode    string
	Provision bool
	// TestsPath is the module's tests page ("" when this server runs no
	// module tests); Test its newest test run (nil: none).
	TestsPath string
	Test      *moduletest.TestRun
}

// modulePage shows a private module and one of its versions: ?version=
// (default the newest ok one, releases before prereleases, as terraform
// is offered it; the newest version when none is ok). An unknown version
// is a 404 saying so.
func (u *UI) modulePage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	org, name, provider := r.PathValue("org"), r.PathValue("name"), r.PathValue("provider")
	// GET /api/v2/organizations/{org}/registry-modules/{registry}/{ns}/{name}/{provider}
	// asks OrgRead, as the registry list does; the service checks the
	// organization again.
	if err := authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	if ns := r.PathValue("ns"); ns != org {
		u.fail(w, r, core.NotFound("registry module %s/%s/%s not found in the private registry of %q: a private module's namespace is its organization", ns, name, provider, org))
		return
	}
	m, vs, err := u.o.Registry.Versions(ctx, org, name, provider)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	chosen := r.URL.Query().Get("version")
	var sel *registry.Version
	if chosen != "" || slices.ContainsFunc(vs, func(v *registry.Version) bool { return v.Status == registry.VersionOK }) {
		if sel, err = registry.ChooseVersion(m, vs, chosen); err != nil {
			u.fail(w, r, err)
			return
		}
	} else if len(vs) > 0 {
		sel = vs[0]
	}
	d := modulePageData{Module: m, Status: m.Status(), StatusClass: moduleStatusClass(m.Status()), Path: modulePagePath(m), Selected: sel}
	for _, v := range vs {
		d.Versions = append(d.Versions, moduleVersionRow{V: v, State: versionState(v.Status), Selected: sel != nil && v.ID == sel.ID})
	}
	if sel != nil {
		d.SelectedState = versionState(sel.Status)
		if d.SelectedState == "ok" && sel.Inspection != nil {
			d.Inspection = sel.Inspection
			d.Inputs = moduleInputs(sel.Inspection.Variables)
			d.SourceHost, d.HostNote = moduleSourceHost(u.o.Hostname)
			d.Usage = moduleUsage(d.SourceHost, m, sel.Version, d.Inputs)
			readme, err := u.o.Registry.VersionReadme(ctx, m, sel)
			if err != nil {
				u.fail(w, r, err)
				return
			}
			if readme != "" {
				d.Readme = readmeHTML(readme)
			}
		}
	}
	if u.o.NoCode != nil {
		nc, err := u.o.NoCode.NoCodeModuleIDs(ctx, []string{m.ID})
		if err != nil {
			u.fail(w, r, err)
			return
		}
		if l := nc[m.ID]; len(l) > 0 {
			d.NoCode = l[0]
			if d.Provision, err = u.mayProvision(ctx, org); err != nil {
				u.fail(w, r, err)
				return
			}
		}
	}
	if u.o.ModuleTests != nil {
		d.TestsPath = testsPagePath(moduletest.Path{Organization: org, Registry: registry.RegistryPrivate, Namespace: m.Namespace, Name: m.Name, Provider: m.Provider})
		latest, err := u.o.ModuleTests.Latest(ctx, []string{m.ID})
		if err != nil {
			u.fail(w, r, err)
			return
		}
		d.Test = latest[m.ID]
	}
	u.renderPage(w, r, http.StatusOK, "module", page{Title: "Module " + m.Name + "/" + m.Provider, Org: org, Data: d,
		Crumbs: []crumb{{Name: "Registry", Href: orgPath(org, "registry")}, {Name: m.Name + "/" + m.Provider}}})
}
