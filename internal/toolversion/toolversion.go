// Package toolversion keeps the terraform versions a site admin registered
// (Terraform Enterprise's admin terraform versions API): a version, where
// its release zip is downloaded for each platform and the zip's SHA-256,
// and whether workspaces may choose it.
//
// A registration is what makes a version usable on runners that lack it:
// a run asking for a registered, enabled version that its runner has not
// installed gets the version's builds with its inputs (Release), and the
// runner downloads, checks and installs its platform's zip
// (internal/engine, FindOrInstall). A version that is not registered
// still runs wherever it is installed, as before: registering is never
// required.
//
// A workspace on "latest" (the default) runs the newest registered,
// enabled release that is not marked beta when that is newer than the
// terraform on its runner's PATH, and the one on PATH otherwise: as in
// HCP Terraform, registering a newer version moves "latest" workspaces to
// it, and registering an older one never moves them back. A run on
// "latest" or a constraint records the exact version its plan ran with
// as its own terraform-version, and its apply uses that one.
//
// Rules, each a 422 that says why: a workspace may not be set to a
// version that is registered but disabled (workspaces already on it keep
// it); a version in use by a workspace cannot be deleted or renamed, as in
// Terraform Enterprise. Usage counts the workspaces of the whole site that
// name the version.
package toolversion

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// Version is a registered terraform version.
type Version struct {
	ID      string
	Version string
	// Archs are its builds: where each platform's zip is and its SHA-256.
	Archs                   []Arch
	Official, Enabled, Beta bool
	Deprecated              bool
	DeprecatedReason        *string // nil unless deprecated with a reason
	Usage                   int     // workspaces that use it
	CreatedAt, UpdatedAt    time.Time
}

// Arch is one platform's build of a version: a zip holding the binary at
// its top, and the zip's SHA-256 in hex.
type Arch struct {
	URL  string `json:"url"`
	SHA  string `json:"sha"`
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// The platform of a version's top-level url and sha, as in Terraform
// Enterprise.
const (
	defaultOS   = "linux"
	defaultArch = "amd64"
)

// primary returns the version's linux/amd64 build (nil for none): its url
// and sha are the version's own.
func (v *Version) primary() *Arch {
	for i := range v.Archs {
		if v.Archs[i].OS == defaultOS && v.Archs[i].Arch == defaultArch {
			return &v.Archs[i]
		}
	}
	return nil
}

// URL is the linux/amd64 build's URL ("" without one).
func (v *Version) URL() string {
	if a := v.primary(); a != nil {
		return a.URL
	}
	return ""
}

// SHA is the linux/amd64 build's SHA-256 ("" without one).
func (v *Version) SHA() string {
	if a := v.primary(); a != nil {
		return a.SHA
	}
	return ""
}

// Options are the attributes of a new or changed version; nil fields are
// unchanged (or defaulted on create).
type Options struct {
	Version          *string
	URL, SHA         *string
	Official         *bool
	Enabled          *bool
	Beta             *bool
	Deprecated       *bool
	DeprecatedReason *string
	// Archs, when set, replace the version's builds.
	Archs *[]Arch
}

var (
	versionRE  = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	shaRE      = core.NewPattern(`^[0-9a-fA-F]*$`, 64, 64)
	platformRE = core.NewPattern(`^[a-z0-9]*$`, 1, 32)
)

// validVersion checks a version as terraform reports itself ("1.9.8",
// "1.10.0-beta1"): it also names the folder a runner installs it in.
func validVersion(v string) error {
	if len(v) > 64 || !versionRE.MatchString(v) {
		return core.Invalid("version %q is not a version: use one like 1.9.8 or 1.10.0-beta1 (no leading v)", v)
	}
	return nil
}

// checkArch checks one build (what names it in messages) and returns it
// with its sha in lower case.
func checkArch(a Arch, what string) (Arch, error) {
	if len(a.URL) > 2048 {
		return a, core.Invalid("%s url is longer than 2048 characters", what)
	}
	u, err := url.Parse(a.URL)
	if a.URL == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return a, core.Invalid("%s url %q is not an http or https URL of the release zip", what, a.URL)
	}
	if !shaRE.MatchString(a.SHA) {
		return a, core.Invalid("%s sha must be the SHA-256 of the zip in hex (64 characters), not %q", what, a.SHA)
	}
	if !platformRE.MatchString(a.OS) || !platformRE.MatchString(a.Arch) {
		return a, core.Invalid("%s os and arch must name a platform as Go does (linux, amd64, arm64, …), not %q and %q", what, a.OS, a.Arch)
	}
	a.SHA = strings.ToLower(a.SHA)
	return a, nil
}

// apply makes o's changes to v, checked.
//
// The builds: archs, when given, are the builds; url and sha are the
// linux/amd64 build's, which they add when archs have none (and must
// match when they have one). url and sha without archs make that build
// the only one, as in Terraform Enterprise (on an update, the one not
// given is kept from the linux/amd64 build).
func (o Options) apply(v *Version) error {
	if o.Version != nil {
		if err := validVersion(*o.Version); err != nil {
			return err
		}
		v.Version = *o.Version
	}
	if o.Archs != nil {
		archs := make([]Arch, 0, len(*o.Archs))
		seen := map[string]bool{}
		for i, a := range *o.Archs {
			a, err := checkArch(a, "archs["+strconv.Itoa(i)+"]")
			if err != nil {
				return err
			}
			if seen[a.OS+"/"+a.Arch] {
				return core.Invalid("archs name %s/%s twice", a.OS, a.Arch)
			}
			seen[a.OS+"/"+a.Arch] = true
			archs = append(archs, a)
		}
		v.Archs = archs
		if o.URL != nil || o.SHA != nil {
			if p := v.primary(); p != nil {
				if (o.URL != nil && *o.URL != p.URL) || (o.SHA != nil && !strings.EqualFold(*o.SHA, p.SHA)) {
					return core.Invalid("url and sha are the linux/amd64 build's, and differ from the linux/amd64 entry of archs: give one or the other, or the same")
				}
			} else {
				if o.URL == nil || o.SHA == nil {
					return core.Invalid("url and sha go together: they are the linux/amd64 build's")
				}
				a, err := checkArch(Arch{URL: *o.URL, SHA: *o.SHA, OS: defaultOS, Arch: defaultArch}, "the version's")
				if err != nil {
					return err
				}
				v.Archs = append(v.Archs, a)
			}
		}
	} else if o.URL != nil || o.SHA != nil {
		a := Arch{OS: defaultOS, Arch: defaultArch}
		if p := v.primary(); p != nil {
			a.URL, a.SHA = p.URL, p.SHA
		}
		if o.URL != nil {
			a.URL = *o.URL
		}
		if o.SHA != nil {
			a.SHA = *o.SHA
		}
		if a.URL == "" || a.SHA == "" {
			return core.Invalid("url and sha go together: give both (they are the linux/amd64 build's)")
		}
		a, err := checkArch(a, "the version's")
		if err != nil {
			return err
		}
		v.Archs = []Arch{a}
	}
	if len(v.Archs) == 0 {
		return core.Invalid("a version needs a build to download: url and sha (its linux/amd64 build), or archs")
	}
	set := func(dst *bool, val *bool) {
		if val != nil {
			*dst = *val
		}
	}
	set(&v.Official, o.Official)
	set(&v.Enabled, o.Enabled)
	set(&v.Beta, o.Beta)
	set(&v.Deprecated, o.Deprecated)
	if o.DeprecatedReason != nil {
		if len(*o.DeprecatedReason) > 1024 {
			return core.Invalid("deprecated-reason is longer than 1024 characters")
		}
		if !v.Deprecated && *o.DeprecatedReason != "" {
			return core.Invalid("deprecated-reason is the reason a version is deprecated: set deprecated to true with it")
		}
		r := *o.DeprecatedReason
		v.DeprecatedReason = &r
	}
	if !v.Deprecated || (v.DeprecatedReason != nil && *v.DeprecatedReason == "") {
		v.DeprecatedReason = nil
	}
	return nil
}
