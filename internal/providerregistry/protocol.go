package providerregistry

import (
	"context"
	"strings"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// The provider registry protocol (providers.v1), as terraform init reads
// it: https://developer.hashicorp.com/terraform/internals/provider-registry-protocol

// ProtocolPlatform is an os/arch of a version in the versions list.
type ProtocolPlatform struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// ProtocolVersion is one entry of the versions list.
type ProtocolVersion struct {
	Version   string             `json:"version"`
	Protocols []string           `json:"protocols"`
	Platforms []ProtocolPlatform `json:"platforms"`
}

// ProtocolKey is a signing key of a download.
type ProtocolKey struct {
	KeyID          string  `json:"key_id"`
	ASCIIArmor     string  `json:"ascii_armor"`
	TrustSignature string  `json:"trust_signature"`
	Source         string  `json:"source"`
	SourceURL      *string `json:"source_url"`
}

// ProtocolDownload is the answer to a download request.
type ProtocolDownload struct {
	Protocols           []string `json:"protocols"`
	OS                  string   `json:"os"`
	Arch                string   `json:"arch"`
	Filename            string   `json:"filename"`
	DownloadURL         string   `json:"download_url"`
	ShasumsURL          string   `json:"shasums_url"`
	ShasumsSignatureURL string   `json:"shasums_signature_url"`
	Shasum              string   `json:"shasum"`
	SigningKeys         struct {
		GPGPublicKeys []ProtocolKey `json:"gpg_public_keys"`
	} `json:"signing_keys"`
}

// published is a version terraform may install, with its key and the
// platforms whose zip is uploaded.
type published struct {
	v         *Version
	key       *GPGKey
	platforms []*Platform
}

// protocolProvider finds the private provider namespace/name (terraform
// lowercases both) and checks the caller may fetch it. A private
// provider's namespace is its organization, by the organization's current
// name: the namespace column keeps the name the organization had when the
// provider was created, which after a rename another organization may
// take (and publish under).
func (s *Service) protocolProvider(ctx context.Context, namespace, name string) (*Provider, error) {
	notFound := core.NotFound("provider %s/%s not found", namespace, name)
	ps, err := store.All(ctx, s.db, scanProvider, `SELECT `+providerCols+` FROM registry_providers WHERE registry_name = ? AND LOWER(organization_name) = ? AND LOWER(name) = ? ORDER BY id`,
		RegistryPrivate, strings.ToLower(namespace), strings.ToLower(name))
	if err != nil {
		return nil, err
	}
	if len(ps) != 1 {
		return nil, notFound
	}
	if err := fetch(ctx, ps[0].Organization); err != nil {
		// As module downloads: not found for who may not see the
		// organization, forbidden for tokens that see it but may not
		// fetch (agents, task results).
		return nil, err
	}
	return ps[0], nil
}

// publishedVersions returns the provider's versions that terraform may
// install, newest first.
func (s *Service) publishedVersions(ctx context.Context, p *Provider) ([]published, error) {
	vs, err := versionsOf(ctx, s.db, p.ID)
	if err != nil {
		return nil, err
	}
	keys, err := store.All(ctx, s.db, scanKey, `SELECT `+keyCols+` FROM registry_gpg_keys WHERE organization_name = ?`, p.Organization)
	if err != nil {
		return nil, err
	}
	byID := map[string]*GPGKey{}
	for _, k := range keys {
		byID[k.KeyID] = k
	}
	var signed []published
	var ids []string
	for _, v := range vs {
		k := byID[strings.ToUpper(v.KeyID)]
		if !v.ShasumsUploaded() || !v.ShasumsSigUploaded() || k == nil {
			continue
		}
		signed = append(signed, published{v: v, key: k})
		ids = append(ids, v.ID)
	}
	if len(signed) == 0 {
		return nil, nil
	}
	// The platforms of every signed version whose zip is uploaded, in one
	// statement.
	in, args := store.In(ids)
	pls, err := store.All(ctx, s.db, scanPlatform, `SELECT `+platformCols+` FROM registry_provider_platforms WHERE version_id IN (`+in+`) AND blob_key <> '' ORDER BY os, arch, id`, args...)
	if err != nil {
		return nil, err
	}
	byVersion := map[string][]*Platform{}
	for _, pl := range pls {
		byVersion[pl.VersionID] = append(byVersion[pl.VersionID], pl)
	}
	var out []published
	for _, pub := range signed {
		if pub.platforms = byVersion[pub.v.ID]; len(pub.platforms) > 0 {
			out = append(out, pub)
		}
	}
	return out, nil
}

// ProtocolVersions lists the installable versions of a private provider.
func (s *Service) ProtocolVersions(ctx context.Context, namespace, name string) ([]ProtocolVersion, error) {
	p, err := s.protocolProvider(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	pubs, err := s.publishedVersions(ctx, p)
	if err != nil {
		return nil, err
	}
	out := []ProtocolVersion{}
	for _, pub := range pubs {
		pv := ProtocolVersion{Version: pub.v.Version, Protocols: pub.v.Protocols, Platforms: []ProtocolPlatform{}}
		for _, pl := range pub.platforms {
			pv.Platforms = append(pv.Platforms, ProtocolPlatform{OS: pl.OS, Arch: pl.Arch})
		}
		out = append(out, pv)
	}
	return out, nil
}

// ProtocolDownload answers where terraform downloads a version's zip for
// os/arch, with the SHA256SUMS, its signature and the signing key.
func (s *Service) ProtocolDownload(ctx context.Context, namespace, name, version, os, arch string) (*ProtocolDownload, error) {
	p, err := s.protocolProvider(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	pubs, err := s.publishedVersions(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, pub := range pubs {
		if pub.v.Version != version {
			continue
		}
		for _, pl := range pub.platforms {
			if pl.OS != os || pl.Arch != arch {
				continue
			}
			d := &ProtocolDownload{Protocols: pub.v.Protocols, OS: pl.OS, Arch: pl.Arch, Filename: pl.Filename,
				DownloadURL: s.download(BinaryPath(pl)), ShasumsURL: s.download(ShasumsPath(pub.v)),
				ShasumsSignatureURL: s.download(ShasumsSigPath(pub.v)), Shasum: strings.ToLower(pl.Shasum)}
			d.SigningKeys.GPGPublicKeys = []ProtocolKey{{KeyID: pub.key.KeyID, ASCIIArmor: pub.key.ASCIIArmor}}
			return d, nil
		}
		return nil, core.NotFound("version %s of provider %s/%s has no %s_%s package", version, namespace, name, os, arch)
	}
	return nil, core.NotFound("version %s of provider %s/%s is not published", version, namespace, name)
}
