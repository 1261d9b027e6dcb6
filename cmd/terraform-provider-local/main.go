// Command terraform-provider-local is Terrace's own stand-in for the
// hashicorp/local provider, offering only local_file: a resource whose real
// object (a file) lives outside terraform, so that a test can change it
// behind terraform's back and see drift (refresh-only runs). Written with
// terraform-plugin-framework; served from a filesystem mirror by
// internal/testprovider. See cmd/terraform-provider-null for the rationale.
package main

import (
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/terracehq/terrace/internal/standin"
)

func main() {
	standin.Main(standin.Provider{
		Type: "local",
		// A real hashicorp/local release, so that version constraints resolve.
		Version:       "2.5.2",
		Description:   "Local files (only local_file, with content, in this stand-in).",
		ResourceTypes: []func() resource.Resource{func() resource.Resource { return &fileResource{} }},
	})
}
