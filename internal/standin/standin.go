// Package standin serves Terrace's stand-in providers (cmd/terraform-provider-*):
// small terraform-plugin-framework providers with the real providers'
// addresses and release versions, for machines that cannot install the real
// ones. Each command names its resources; the provider around them is this.
package standin

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

// Provider describes a stand-in: hashicorp/<Type> at Version (a real
// release, so that version constraints in configurations resolve).
type Provider struct {
	Type          string
	Version       string
	Description   string
	ResourceTypes []func() resource.Resource
}

// Main serves p over plugin protocol 5 (-debug for delve) and exits on error.
func Main(p Provider) {
	debug := flag.Bool("debug", false, "run in debug mode (for delve); prints TF_REATTACH_PROVIDERS")
	flag.Parse()
	err := providerserver.Serve(context.Background(), func() provider.Provider { return &p }, providerserver.ServeOpts{
		Address:         "registry.terraform.io/hashicorp/" + p.Type,
		Debug:           *debug,
		ProtocolVersion: 5,
	})
	if err != nil {
		log.Fatal(err)
	}
}

func (p *Provider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = p.Type
	resp.Version = p.Version
}

func (p *Provider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{Description: p.Description}
}

func (p *Provider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}

func (p *Provider) Resources(context.Context) []func() resource.Resource { return p.ResourceTypes }

func (p *Provider) DataSources(context.Context) []func() datasource.DataSource { return nil }
