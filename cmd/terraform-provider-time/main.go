// Command terraform-provider-time is Terrace's own stand-in for the
// hashicorp/time provider, offering only time_sleep: go-tfe's test-run fixture
// (test-fixtures/config-version-with-test) uses it next to null_resource, and
// no real provider can be installed on machines without internet access.
// Written with terraform-plugin-framework; served from a filesystem mirror by
// internal/testprovider. See cmd/terraform-provider-null for the rationale.
package main

import (
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/terracehq/terrace/internal/standin"
)

func main() {
	standin.Main(standin.Provider{
		Type: "time",
		// A real hashicorp/time release, so that version constraints resolve.
		Version:       "0.13.1",
		Description:   "Time-based resources (only time_sleep in this stand-in).",
		ResourceTypes: []func() resource.Resource{func() resource.Resource { return &sleepResource{} }},
	})
}
