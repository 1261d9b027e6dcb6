package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// nullResource is `null_resource`: it stores its triggers and a random id and
// does nothing else. Any change to triggers replaces it, which is what
// configurations use it for (re-running provisioners).
type nullResource struct{}

// nullResourceModel is the state. The attribute names and types (id string,
// triggers map(string)) and schema version 0 match the real provider, so a
// state written by either can be read by the other.
type nullResourceModel struct {
	ID       types.String `tfsdk:"id"`
	Triggers types.Map    `tfsdk:"triggers"`
}

var _ resource.ResourceWithImportState = (*nullResource)(nil)

func newNullResource() resource.Resource { return &nullResource{} }

func (r *nullResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_resource"
}

func (r *nullResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Version:     0,
		Description: "A resource that does nothing; changing its triggers replaces it.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:    true,
				Description: "A random value set when the resource is created.",
				PlanModifiers: []planmodifier.String{
					// The id only changes on replacement; an in-place plan
					// keeps the old one instead of showing "(known after apply)".
					stringplanmodifier.UseStateForUnknown(),
				},
			},
			"triggers": schema.MapAttribute{
				ElementType: types.StringType,
				Optional:    true,
				Description: "Arbitrary strings; any change forces a new resource.",
				PlanModifiers: []planmodifier.Map{
					mapplanmodifier.RequiresReplace(),
				},
			},
		},
	}
}

func (r *nullResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m nullResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, err := randomID()
	if err != nil {
		resp.Diagnostics.AddError("Cannot generate an id", err.Error())
		return
	}
	m.ID = types.StringValue(id)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Read keeps the state as it is: nothing exists outside Terraform to refresh from.
func (r *nullResource) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

// Update is reached only when the plan differs without a replacement (for
// example when moving between an absent and an empty triggers map is not
// treated as a change); it stores the plan and keeps the id.
func (r *nullResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m nullResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.ID.IsUnknown() || m.ID.IsNull() {
		var old nullResourceModel
		resp.Diagnostics.Append(req.State.Get(ctx, &old)...)
		m.ID = old.ID
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Delete has nothing to remove; the framework drops the state afterwards.
func (r *nullResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}

// ImportState accepts any id, so `terraform import null_resource.x 123` works.
func (r *nullResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}

// randomID returns a random non-negative 63-bit integer in decimal, the same
// shape of id as the real provider produces.
func randomID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return strconv.FormatUint(binary.BigEndian.Uint64(b[:])>>1, 10), nil
}
