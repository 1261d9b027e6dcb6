package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/store"
)

// Version statuses, as HCP Terraform spells them.
const (
	VersionPending = "pending" // created, waiting for its upload
	VersionReady   = "ready"   // uploaded and unpacked: the set's current version
	VersionErrored = "errored" // the upload was refused
)

// Version is one uploaded version of a versioned policy set.
type Version struct {
	ID         string
	SetID      string
	Status     string
	Timestamps map[string]time.Time
	Error      string
	// Source is tfe-api for an upload, else the VCS provider whose commit
	// (Ingress) the version was made of.
	Source    string
	Ingress   *Ingress
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Ingress is the commit a version was made of (go-tfe's
// PolicySetIngressAttributes).
type Ingress struct {
	CommitSHA  string `json:"commit-sha"`
	CommitURL  string `json:"commit-url"`
	Identifier string `json:"identifier"`
}

// SourceAPI is the source of an uploaded version.
const SourceAPI = "tfe-api"

// UploadTTL is how long a version's upload link lives.
const UploadTTL = time.Hour

// UploadPath is the capability path of a version's upload.
func UploadPath(id string) string { return "/policy-set-versions/" + id + "/upload" }

const versionCols = `id, policy_set_id, status, status_timestamps, error, source, ingress, created_at, updated_at`

func scanVersion(sc store.Scanner) (*Version, error) {
	var v Version
	var stamps, ingress string
	var created, updated int64
	if err := sc.Scan(&v.ID, &v.SetID, &v.Status, &stamps, &v.Error, &v.Source, &ingress, &created, &updated); err != nil {
		return nil, err
	}
	if ingress != "" {
		v.Ingress = &Ingress{}
		if err := json.Unmarshal([]byte(ingress), v.Ingress); err != nil {
			return nil, fmt.Errorf("decoding the ingress of policy set version %s: %w", v.ID, err)
		}
	}
	if err := json.Unmarshal([]byte(stamps), &v.Timestamps); err != nil {
		return nil, fmt.Errorf("decoding policy set version %s: %w", v.ID, err)
	}
	v.CreatedAt, v.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &v, nil
}

// UploadURL returns the capability URL a version's tarball is PUT to.
func (s *Service) UploadURL(v *Version) string {
	if v.Status != VersionPending {
		return ""
	}
	return s.o.Signer.URL("PUT", UploadPath(v.ID), UploadTTL)
}

// CreateVersion adds a pending version to a set (which becomes versioned:
// its current version's files replace its policies).
func (s *Service) CreateVersion(ctx context.Context, setID string) (*Version, error) {
	set, err := s.managedSet(ctx, setID)
	if err != nil {
		return nil, err
	}
	if set.VCSRepo != nil {
		return nil, core.Invalid("policy set %s takes its versions from %s (branch %s): push there, or disconnect it to upload versions",
			set.ID, set.VCSRepo.Identifier, set.VCSRepo.Branch)
	}
	return s.newVersion(ctx, set, SourceAPI, nil)
}

// ConfigureFromArchive makes a version of a set from a commit's archive
// (acting for the system: the set's connection decided it), which becomes
// its current version once checked. Policies the archive holds that do
// not check (a bad policies.hcl, Rego that does not parse) error the
// version with the reason, and are no error here: retrying changes
// nothing.
func (s *Service) ConfigureFromArchive(ctx context.Context, setID string, archive []byte, source string, in *Ingress) error {
	set, err := s.loadSet(ctx, s.o.DB, setID)
	if err != nil {
		return err
	}
	v, err := s.newVersion(ctx, set, source, in)
	if err != nil {
		return err
	}
	err = s.ReceiveUpload(ctx, v.ID, bytes.NewReader(archive))
	if k := core.KindOf(err); k == core.KindInvalid || k == core.KindTooLarge {
		s.o.Logger.Warn("a policy set version from VCS was refused", "policy_set", set.ID, "version", v.ID, "error", err)
		return nil
	}
	return err
}

func (s *Service) newVersion(ctx context.Context, set *Set, source string, in *Ingress) (*Version, error) {
	now := core.Now()
	v := &Version{ID: core.NewID(PrefixVersion), SetID: set.ID, Status: VersionPending, Timestamps: map[string]time.Time{"pending-at": now},
		Source: source, Ingress: in, CreatedAt: now, UpdatedAt: now}
	ingress := ""
	if in != nil {
		ingress = jsonText(in)
	}
	err := s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO policy_set_versions (`+versionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			v.ID, v.SetID, v.Status, jsonText(v.Timestamps), "", v.Source, ingress, core.Micros(now), core.Micros(now)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE policy_sets SET versioned = ?, newest_version_id = ?, updated_at = ? WHERE id = ?`, true, v.ID, core.Micros(now), set.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// Version returns a version the caller may see.
func (s *Service) Version(ctx context.Context, id string) (*Version, error) {
	v, err := scanVersion(s.o.DB.QueryRow(ctx, `SELECT `+versionCols+` FROM policy_set_versions WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("policy set version %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	if _, err := s.Set(ctx, v.SetID); err != nil {
		return nil, core.NotFound("policy set version %q not found", id)
	}
	return v, nil
}

// versionFiles is what a ready version keeps: the policy files by path.
type versionFiles map[string]string

// policyFileExts are the files a version keeps: Rego modules, and the
// policies.hcl (OPA) or sentinel.hcl that names the policies.
var policyFileExts = []string{".rego", ".sentinel", ".hcl", ".json"}

// ReceiveUpload unpacks a version's tarball (an untrusted archive: through
// internal/slug, bounded by MaxVersionBytes) and keeps its policy files;
// the version becomes ready and its set's current version. A bad archive
// errors the version with the reason, and is a 422.
func (s *Service) ReceiveUpload(ctx context.Context, id string, body io.Reader) error {
	v, err := scanVersion(s.o.DB.QueryRow(ctx, `SELECT `+versionCols+` FROM policy_set_versions WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return core.NotFound("policy set version %q not found", id)
	}
	if err != nil {
		return err
	}
	if v.Status != VersionPending {
		return core.Conflict("policy set version %s is %s: only a pending version takes an upload", id, v.Status)
	}
	set, err := s.loadSet(ctx, s.o.DB, v.SetID)
	if err != nil {
		return err
	}
	files, uerr := s.unpack(body, set)
	if uerr == nil && set.Kind == OPA {
		_, _, uerr = opaContent(files, set.PoliciesPath)
	}
	now := core.Now()
	if uerr != nil {
		v.Timestamps["errored-at"] = now
		if _, err := s.o.DB.Exec(ctx, `UPDATE policy_set_versions SET status = ?, status_timestamps = ?, error = ?, updated_at = ? WHERE id = ? AND status = ?`,
			VersionErrored, jsonText(v.Timestamps), uerr.Error(), core.Micros(now), v.ID, VersionPending); err != nil {
			return err
		}
		return uerr
	}
	v.Timestamps["ready-at"] = now
	return s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		res, err := tx.Exec(ctx, `UPDATE policy_set_versions SET status = ?, status_timestamps = ?, files = ?, updated_at = ? WHERE id = ? AND status = ?`,
			VersionReady, jsonText(v.Timestamps), jsonText(files), core.Micros(now), v.ID, VersionPending)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return core.Conflict("policy set version %s changed meanwhile", id)
		}
		_, err = tx.Exec(ctx, `UPDATE policy_sets SET current_version_id = ?, updated_at = ? WHERE id = ?`, v.ID, core.Micros(now), v.SetID)
		return err
	})
}

func (s *Service) unpack(body io.Reader, set *Set) (versionFiles, error) {
	dir, err := os.MkdirTemp("", "terrace-policy-set-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := slug.Unpack(body, dir, slug.Limits{MaxBytes: s.o.MaxVersionBytes, MaxFiles: 10_000}); err != nil {
		return nil, err
	}
	files := versionFiles{}
	root := dir
	if set.PoliciesPath != "" {
		root = filepath.Join(dir, filepath.FromSlash(path.Clean(set.PoliciesPath)))
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		keep := false
		for _, ext := range policyFileExts {
			keep = keep || strings.HasSuffix(p, ext)
		}
		if !keep {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if os.IsNotExist(err) {
		return nil, core.Invalid("the archive has no %s directory (the set's policies-path)", set.PoliciesPath)
	}
	return files, err
}

// policiesHCL is an OPA policy set's policies.hcl: one block per policy.
type policiesHCL struct {
	Policies []struct {
		Name             string  `hcl:"name,label"`
		Query            string  `hcl:"query"`
		EnforcementLevel string  `hcl:"enforcement_level"`
		Description      *string `hcl:"description,optional"`
	} `hcl:"policy,block"`
	Remain hcl.Body `hcl:",remain"`
}

// opaContent reads a version's Rego modules and its policies.hcl.
func opaContent(files versionFiles, _ string) (map[string]string, []opaPolicy, error) {
	src, ok := files["policies.hcl"]
	if !ok {
		return nil, nil, core.Invalid("an OPA policy set version needs a policies.hcl naming its policies (policy \"name\" { query = ..., enforcement_level = ... })")
	}
	f, diags := hclparse.NewParser().ParseHCL([]byte(src), "policies.hcl")
	if diags.HasErrors() {
		return nil, nil, core.Invalid("policies.hcl: %s", diags.Error())
	}
	var doc policiesHCL
	if diags := gohcl.DecodeBody(f.Body, nil, &doc); diags.HasErrors() {
		return nil, nil, core.Invalid("policies.hcl: %s", diags.Error())
	}
	var policies []opaPolicy
	for _, p := range doc.Policies {
		if err := checkLevel(OPA, Level(p.EnforcementLevel)); err != nil {
			return nil, nil, core.Invalid("policies.hcl: policy %q: %v", p.Name, err)
		}
		if err := checkQuery(p.Query); err != nil {
			return nil, nil, core.Invalid("policies.hcl: policy %q: %v", p.Name, err)
		}
		op := opaPolicy{Name: p.Name, Query: p.Query, Level: Level(p.EnforcementLevel)}
		if p.Description != nil {
			op.Description = *p.Description
		}
		policies = append(policies, op)
	}
	modules := map[string]string{}
	var names []string
	for name, src := range files {
		if strings.HasSuffix(name, ".rego") && !strings.HasSuffix(name, "_test.rego") {
			modules[name] = src
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if _, err := parseModule(n, modules[n]); err != nil {
			return nil, nil, err
		}
	}
	return modules, policies, nil
}

// versionContent returns the modules and policies of a set's current
// version.
func (s *Service) versionContent(ctx context.Context, set *Set) (map[string]string, []opaPolicy, error) {
	var raw string
	if err := s.o.DB.QueryRow(ctx, `SELECT files FROM policy_set_versions WHERE id = ?`, set.CurrentVersionID).Scan(&raw); err != nil {
		return nil, nil, fmt.Errorf("reading policy set version %s: %w", set.CurrentVersionID, err)
	}
	return decodeVersion(set, raw)
}

// decodeVersion reads the stored files of set's current version: an OPA
// set's modules and policies (opaContent), a Sentinel set's .sentinel
// files as its policies, hard-mandatory (Terrace does not read
// sentinel.hcl), by name.
func decodeVersion(set *Set, raw string) (map[string]string, []opaPolicy, error) {
	var files versionFiles
	if err := json.Unmarshal([]byte(raw), &files); err != nil {
		return nil, nil, fmt.Errorf("decoding policy set version %s: %w", set.CurrentVersionID, err)
	}
	if set.Kind != OPA {
		var policies []opaPolicy
		for name := range files {
			if strings.HasSuffix(name, ".sentinel") {
				policies = append(policies, opaPolicy{Name: strings.TrimSuffix(path.Base(name), ".sentinel"), Level: HardMandatory})
			}
		}
		sort.Slice(policies, func(i, j int) bool { return policies[i].Name < policies[j].Name })
		return nil, policies, nil
	}
	return opaContent(files, set.PoliciesPath)
}
