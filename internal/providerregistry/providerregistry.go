// Package providerregistry is the organization's private provider
// registry, HCP Terraform's registry-providers API: a platform team
// publishes its own providers and `terraform init` installs them,
// signature-checked, from <terrace host>/<organization>/<name>.
//
// Publishing follows HCP Terraform's steps:
//
//  1. add the GPG public key that signs releases to the organization's
//     namespace (POST /api/registry/private/v2/gpg-keys); the server reads
//     the armored key and derives its key ID, and refuses anything but one
//     public key (a private key block is refused, never stored);
//  2. create the provider (POST /api/v2/organizations/:org/registry-providers);
//  3. create a version naming the key ID and the plugin protocols; the
//     response links shasums-upload and shasums-sig-upload, capability URLs
//     to PUT the SHA256SUMS file and its detached signature to;
//  4. create a platform per os/arch with the zip's filename and SHA-256;
//     its provider-binary-upload link takes the zip.
//
// What an upload checks, and when. A version is created with any key ID,
// as HCP Terraform allows (go-tfe's tests create versions with made-up key
// IDs): the key is needed when the signature is uploaded, which is refused
// (422) unless the namespace holds that key and the signature verifies the
// uploaded SHA256SUMS with it. SHA256SUMS must be well formed and, for
// every platform already created, list the platform's filename with its
// shasum; a platform created after SHA256SUMS must match its line. A
// platform's shasum is not checked for form when created (HCP Terraform
// accepts any string), but its zip is: an upload whose SHA-256 differs is
// refused and nothing is stored. Re-uploading is allowed and replaces the
// file only when it passes the same checks; a new SHA256SUMS drops a
// signature that no longer verifies it. The zip goes to the blob store;
// SHA256SUMS (at most MaxShasumsBytes) and the signature (at most
// MaxSignatureBytes) are small and kept in the version's row. An armored
// signature is stored in its binary form, the one terraform reads.
//
// terraform reaches the providers through the provider registry protocol
// (providers.v1 at /api/registry/v1/providers/): namespace is the
// organization, authenticated like module downloads (authz
// OrgReadProviders: members, team and organization tokens, and the token of
// a run of the same organization). A version is offered only when its
// SHA256SUMS and signature are uploaded, its key is still in the
// namespace, and for the platforms whose zip is uploaded. Download,
// SHA256SUMS and signature URLs are short-lived capability URLs, since
// terraform fetches them without credentials.
//
// Public providers are references to providers of the public registry
// (a namespace and a name): they have no versions here.
package providerregistry

import (
	"context"
	"regexp"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// ID prefixes (HCP Terraform's).
const (
	PrefixProvider = "prov"
	PrefixVersion  = "provver"
	PrefixPlatform = "provpltfrm"
	PrefixGPGKey   = "gpgkey"
)

// Registry names.
const (
	RegistryPrivate = "private"
	RegistryPublic  = "public"
)

// Provider is one provider of an organization's registry.
type Provider struct {
	ID           string
	Organization string
	RegistryName string
	Namespace    string
	Name         string
	TagBindings  []TagBinding
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Ref names a provider as the API's paths do.
type Ref struct {
	Organization, RegistryName, Namespace, Name string
}

// TagBinding is a key/value tag on a provider.
type TagBinding struct {
	ID    string `json:"id"`
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Version is one version of a private provider.
type Version struct {
	ID         string
	ProviderID string
	Version    string
	KeyID      string
	Protocols  []string
	// Shasums is the uploaded SHA256SUMS file ("" until uploaded).
	Shasums string
	// ShasumsSig is the binary detached signature of Shasums (nil until
	// uploaded).
	ShasumsSig []byte
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// ShasumsUploaded reports whether SHA256SUMS is uploaded.
func (v *Version) ShasumsUploaded() bool { return v.Shasums != "" }

// ShasumsSigUploaded reports whether the signature is uploaded.
func (v *Version) ShasumsSigUploaded() bool { return len(v.ShasumsSig) > 0 }

// Platform is one os/arch build of a version.
type Platform struct {
	ID        string
	VersionID string
	OS        string
	Arch      string
	Filename  string
	Shasum    string
	Size      int64
	CreatedAt time.Time
	UpdatedAt time.Time

	blobKey string
}

// BinaryUploaded reports whether the platform's zip is uploaded.
func (p *Platform) BinaryUploaded() bool { return p.blobKey != "" }

// GPGKey is a public key of a namespace of the private registry.
type GPGKey struct {
	ID         string
	Namespace  string
	KeyID      string
	ASCIIArmor string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Organizations tells the registry whether an organization exists.
type Organizations interface {
	Exists(ctx context.Context, name string) error
}

var (
	// Names and namespaces: letters, digits, '-' and '_' (HCP Terraform
	// accepts "provider_name"), starting with a letter or digit.
	nameRe = core.NewPattern(`^[0-9A-Za-z][0-9A-Za-z_-]*$`, 1, 64)
	// Platforms as terraform writes them (linux, amd64, freebsd, 386).
	platformRe = core.NewPattern(`^[a-z0-9_]+$`, 1, 32)
	// A zip's filename: one path element of safe characters.
	filenameRe = core.NewPattern(`^[0-9A-Za-z_+-][0-9A-Za-z._+-]*$`, 1, 255)
	// A shasum as given (HCP Terraform takes any string; the upload must
	// match it).
	shasumRe = core.NewPattern(`^[!-~]+$`, 1, 128)
	// Plugin protocol versions ("5.0", "6").
	protocolRe = regexp.MustCompile(`^[0-9]{1,3}(\.[0-9]{1,3})?$`)
	// A key ID as a version names it: HCP Terraform takes any string (the
	// signature upload needs the namespace to hold the key).
	keyIDRe = core.NewPattern(`^[!-~]+$`, 1, 128)
	// A SHA-256, lowercase hex.
	sha256Re = core.NewPattern(`^[0-9a-f]+$`, 64, 64)
)

func invalid(format string, args ...any) error { return core.Invalid(format, args...) }
