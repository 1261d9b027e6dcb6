package main

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// nullDataSource is the deprecated `null_data_source`: it echoes inputs to
// outputs. Kept because it is small and old configurations still use it.
type nullDataSource struct{}

type nullDataSourceModel struct {
	ID                 types.String `tfsdk:"id"`
	Inputs             types.Map    `tfsdk:"inputs"`
	Outputs            types.Map    `tfsdk:"outputs"`
	Random             types.String `tfsdk:"random"`
	HasComputedDefault types.String `tfsdk:"has_computed_default"`
}

func newNullDataSource() datasource.DataSource { return &nullDataSource{} }

func (d *nullDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_data_source"
}

func (d *nullDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description:        "Echoes its inputs as outputs.",
		DeprecationMessage: "Use locals, or the terraform_data resource, instead.",
		Attributes: map[string]schema.Attribute{
			"inputs": schema.MapAttribute{
				ElementType: types.StringType, Optional: true,
				Description: "Values copied to outputs.",
			},
			"outputs": schema.MapAttribute{
				ElementType: types.StringType, Computed: true,
				Description: "A copy of inputs.",
			},
			"random": schema.StringAttribute{
				Computed: true, Description: "A random value, new on every read.",
			},
			"has_computed_default": schema.StringAttribute{
				Optional: true, Computed: true,
				Description: `Its configured value, or "default".`,
			},
			"id": schema.StringAttribute{
				Computed: true, Description: `Always "static".`,
			},
		},
	}
}

func (d *nullDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m nullDataSourceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	random, err := randomID()
	if err != nil {
		resp.Diagnostics.AddError("Cannot generate a random value", err.Error())
		return
	}
	m.Outputs = m.Inputs
	if m.Outputs.IsNull() {
		m.Outputs = types.MapNull(types.StringType)
	}
	m.Random = types.StringValue(random)
	if m.HasComputedDefault.IsNull() || m.HasComputedDefault.IsUnknown() {
		m.HasComputedDefault = types.StringValue("default")
	}
	m.ID = types.StringValue("static")
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
