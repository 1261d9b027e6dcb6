// Command terraform-provider-local is Terrace's own stand-in for the
// hashicorp/local provider, offering only local_file: a resource whose real
// object (a file) lives outside terraform, so that a test can change it
// behind terraform's back and see drift (refresh-only runs). Written with
// terraform-plugin-framework; served from a filesystem mirror by
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

// version is a real hashicorp/local release, so constraints such as
// "~> 2.5" resolve.
var version = "2.5.2"

func main() {
	debug := flag.Bool("debug", false, "run in debug mode (for delve); prints TF_REATTACH_PROVIDERS")
	flag.Parse()
	err := providerserver.Serve(context.Background(), func() provider.Provider { return &localProvider{} }, providerserver.ServeOpts{
		Address:         "registry.terraform.io/hashicorp/local",
		Debug:           *debug,
		ProtocolVersion: 5,
	})
	if err != nil {
		log.Fatal(err)
	}
}

type localProvider struct{}

func (p *localProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "local"
	resp.Version = version
}

func (p *localProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{Description: "Local files (only local_file, with content, in this stand-in)."}
}

func (p *localProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}

func (p *localProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return &fileResource{} }}
}

func (p *localProvider) DataSources(context.Context) []func() datasource.DataSource { return nil }
