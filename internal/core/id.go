package core

import (
	"crypto/rand"
	"strings"
)

// ID prefixes used across Terrace. They match HCP Terraform's so that IDs
// look familiar to users and clients.
const (
	PrefixOrganization  = "org"
	PrefixProject       = "prj"
	PrefixWorkspace     = "ws"
	PrefixRun           = "run"
	PrefixStateVersion  = "sv"
	PrefixStateOutput   = "wsout"
	PrefixVariable      = "var"
	PrefixVariableSet   = "varset"
	PrefixTeam          = "team"
	PrefixUser          = "user"
	PrefixToken         = "at"
	PrefixConfigVersion = "cv"
	PrefixPlan          = "plan"
	PrefixApply         = "apply"
	PrefixTagBinding    = "tb"
	PrefixTag           = "tag"
	PrefixSSHKey        = "sshkey"
	// PrefixReservedTagKey is HCP Terraform's prefix for reserved tag keys.
	PrefixReservedTagKey = "rtk"
	// PrefixToolVersion is Terraform Enterprise's prefix for the terraform
	// versions of its admin API.
	PrefixToolVersion = "tool"
	// PrefixRetentionPolicy is Terraform Enterprise's prefix for data
	// retention policies.
	PrefixRetentionPolicy = "drp"
)

const idAlphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"

// NewID returns a new random ID with the given prefix, such as "ws-8Wz3hYk2pQ4bXr1m".
func NewID(prefix string) string {
	return prefix + "-" + RandomString(16)
}

// RandomString returns n characters drawn uniformly from an unambiguous
// alphanumeric alphabet using crypto/rand.
func RandomString(n int) string {
	var b strings.Builder
	b.Grow(n)
	buf := make([]byte, n*2)
	for b.Len() < n {
		_, _ = rand.Read(buf)
		for _, c := range buf {
			// Reject bytes that would bias the distribution.
			if int(c) >= 256-(256%len(idAlphabet)) {
				continue
			}
			b.WriteByte(idAlphabet[int(c)%len(idAlphabet)])
			if b.Len() == n {
				break
			}
		}
	}
	return b.String()
}

// HasPrefix reports whether id looks like an ID with the given prefix. It
// lets handlers answer a malformed ID with 404 without a database round trip.
func HasPrefix(id, prefix string) bool {
	return len(id) > len(prefix)+1 && strings.HasPrefix(id, prefix+"-")
}
