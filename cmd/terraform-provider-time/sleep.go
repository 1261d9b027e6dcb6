package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// sleepResource is `time_sleep`: it waits create_duration when created and
// destroy_duration when destroyed. Its id is the creation time (RFC 3339).
type sleepResource struct{}

type sleepModel struct {
	ID              types.String `tfsdk:"id"`
	CreateDuration  types.String `tfsdk:"create_duration"`
	DestroyDuration types.String `tfsdk:"destroy_duration"`
	Triggers        types.Map    `tfsdk:"triggers"`
}

var _ resource.ResourceWithValidateConfig = (*sleepResource)(nil)

func (r *sleepResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_sleep"
}

func (r *sleepResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Waits a while when created and/or destroyed.",
		Attributes: map[string]schema.Attribute{
			"create_duration": schema.StringAttribute{
				Optional:    true,
				Description: `How long to wait on create, as a Go duration ("30s", "1m").`,
			},
			"destroy_duration": schema.StringAttribute{
				Optional:    true,
				Description: `How long to wait on destroy, as a Go duration.`,
			},
			"triggers": schema.MapAttribute{
				ElementType:   types.StringType,
				Optional:      true,
				Description:   "Arbitrary strings; any change forces a new resource.",
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplace()},
			},
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "The creation time, RFC 3339.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
		},
	}
}

func (r *sleepResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m sleepModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	for name, v := range map[string]types.String{"create_duration": m.CreateDuration, "destroy_duration": m.DestroyDuration} {
		if _, err := duration(v); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root(name), "Invalid duration", err.Error())
		}
	}
}

// duration parses an optional duration; null and unknown are zero.
func duration(v types.String) (time.Duration, error) {
	if v.IsNull() || v.IsUnknown() {
		return 0, nil
	}
	d, err := time.ParseDuration(v.ValueString())
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 30s or 1m: %v", v.ValueString(), err)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", v.ValueString())
	}
	return d, nil
}

// sleep waits d, or returns an error when Terraform cancels (Ctrl-C, or a
// run being cancelled).
func sleep(ctx context.Context, d time.Duration) diag.Diagnostics {
	var diags diag.Diagnostics
	if d == 0 {
		return diags
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
		diags.AddError("Sleep interrupted", ctx.Err().Error())
	}
	return diags
}

func (r *sleepResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m sleepModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	d, err := duration(m.CreateDuration)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("create_duration"), "Invalid duration", err.Error())
		return
	}
	m.ID = types.StringValue(time.Now().UTC().Format(time.RFC3339))
	if resp.Diagnostics.Append(sleep(ctx, d)...); resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *sleepResource) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

// Update stores new durations without waiting, keeping the id.
func (r *sleepResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state sleepModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.ID = state.ID
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *sleepResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m sleepModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	d, err := duration(m.DestroyDuration)
	if err != nil {
		return // a state with a bad duration should still be destroyable
	}
	resp.Diagnostics.Append(sleep(ctx, d)...)
}
