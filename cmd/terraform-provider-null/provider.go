package main

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// nullProvider has no configuration: `provider "null" {}` is accepted and
// ignored, as with the real provider.
type nullProvider struct {
	version string
}

func newProvider(version string) func() provider.Provider {
	return func() provider.Provider { return &nullProvider{version: version} }
}

func (p *nullProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "null"
	resp.Version = p.version
}

func (p *nullProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Resources that intentionally do nothing, to hang provisioners and dependencies on.",
	}
}

func (p *nullProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}

func (p *nullProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newNullResource}
}

func (p *nullProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newNullDataSource}
}
