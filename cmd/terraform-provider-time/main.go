// Command terraform-provider-time is Terrace's own stand-in for the
// hashicorp/time provider, offering only time_sleep: go-tfe's test-run fixture
// (test-fixtures/config-version-with-test) uses it next to null_resource, and
// no real provider can be installed on machines without internet access.
// Written with terraform-plugin-framework; served from a filesystem mirror by
// internal/testprovider. See cmd/terraform-provider-null for the rationale.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// version is a real hashicorp/time release, so constraints such as
// "~> 0.13" resolve.
var version = "0.13.1"

func main() {
	debug := flag.Bool("debug", false, "run in debug mode (for delve); prints TF_REATTACH_PROVIDERS")
	flag.Parse()
	err := providerserver.Serve(context.Background(), func() provider.Provider { return &timeProvider{} }, providerserver.ServeOpts{
		Address:         "registry.terraform.io/hashicorp/time",
		Debug:           *debug,
		ProtocolVersion: 5,
	})
	if err != nil {
		log.Fatal(err)
	}
}

type timeProvider struct{}

func (p *timeProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "time"
	resp.Version = version
}

func (p *timeProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{Description: "Time-based resources (only time_sleep in this stand-in)."}
}

func (p *timeProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}

func (p *timeProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return &sleepResource{} }}
}

func (p *timeProvider) DataSources(context.Context) []func() datasource.DataSource { return nil }
