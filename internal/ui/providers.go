package ui

import (
	"net/http"
	"strings"

	"github.com/terracehq/terrace/internal/providerregistry"
)

// The private provider registry's pages read what its API reads, through
// the same service calls and so the same decisions: a list of providers
// and a provider's versions are read as the API's registry-providers
// routes read them (the model's OrgRead), and the GPG keys as the
// gpg-keys route does. Publishing stays API-only, as on HCP Terraform.

type providerRow struct {
	P *providerregistry.Provider
	// Latest is the provider's newest version (nil when it has none);
	// Platforms are that version's.
	Latest    *providerregistry.Version
	Platforms []*providerregistry.Platform
}

// providers lists the organization's private providers, each with its
// newest version and that version's platforms.
func (u *UI) providers(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	org := r.PathValue("org")
	search := r.URL.Query().Get("search")
	ps, _, err := u.o.Providers.List(ctx, org, providerregistry.ListOptions{RegistryName: providerregistry.RegistryPrivate, Search: search}, 0, -1)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	versions, err := u.o.Providers.Versions(ctx, ps)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	var latest []*providerregistry.Version
	for _, p := range ps {
		if vs := versions[p.ID]; len(vs) > 0 {
			latest = append(latest, vs[0])
		}
	}
	platforms, err := u.o.Providers.Platforms(ctx, latest)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	rows := make([]providerRow, 0, len(ps))
	for _, p := range ps {
		row := providerRow{P: p}
		if vs := versions[p.ID]; len(vs) > 0 {
			row.Latest, row.Platforms = vs[0], platforms[vs[0].ID]
		}
		rows = append(rows, row)
	}
	u.render(w, r, http.StatusOK, "providers", "Private registry: providers", org, map[string]any{"Rows": rows, "Search": search})
}

type providerVersion struct {
	V         *providerregistry.Version
	Platforms []*providerregistry.Platform
	// KeyInNamespace: the organization holds the GPG key the version
	// names (terraform is offered the version only then).
	KeyInNamespace bool
}

// provider shows a private provider: the block that requires it, and its
// versions, newest first, each with its platforms and what of its
// release is uploaded.
func (u *UI) provider(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	org := r.PathValue("org")
	p, vs, err := u.o.Providers.ListVersions(ctx, providerregistry.Ref{
		Organization: org, RegistryName: providerregistry.RegistryPrivate, Namespace: r.PathValue("ns"), Name: r.PathValue("name")})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	platforms, err := u.o.Providers.Platforms(ctx, vs)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	keys, _, err := u.o.Providers.ListKeys(ctx, []string{p.Organization}, 0, -1)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	held := map[string]bool{}
	for _, k := range keys {
		held[strings.ToUpper(k.KeyID)] = true
	}
	rows := make([]providerVersion, 0, len(vs))
	for _, v := range vs {
		rows = append(rows, providerVersion{V: v, Platforms: platforms[v.ID], KeyInNamespace: held[strings.ToUpper(v.KeyID)]})
	}
	latest := ""
	if len(vs) > 0 {
		latest = vs[0].Version
	}
	u.render(w, r, http.StatusOK, "provider", "Provider "+p.Namespace+"/"+p.Name, org, map[string]any{
		"P": p, "Versions": rows, "Hostname": u.o.Hostname,
		"Source": providerSource(u.o.Hostname, p), "Block": requiredProvidersBlock(u.o.Hostname, p, latest),
	})
}

// providerSource is a private provider's source address, HOST/ORG/NAME:
// the server's public hostname (as in the cloud block), and the
// organization's current name, under which providers.v1 serves it.
func providerSource(host string, p *providerregistry.Provider) string {
	return host + "/" + p.Organization + "/" + p.Name
}

// requiredProvidersBlock is the configuration that installs the provider,
// pinned to version (no constraint when "").
func requiredProvidersBlock(host string, p *providerregistry.Provider, version string) string {
	// terraform names a provider locally by its type, in lowercase.
	local := strings.ToLower(p.Name)
	attrs := `source = "` + providerSource(host, p) + `"`
	if version != "" {
		attrs = `source  = "` + providerSource(host, p) + `"` + "\n      " + `version = "` + version + `"`
	}
	return `terraform {
  required_providers {
    ` + local + ` = {
      ` + attrs + `
    }
  }
}

provider "` + local + `" {
  # Configuration options
}`
}
