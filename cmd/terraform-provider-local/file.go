package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// fileResource is local_file with the attributes of the real provider that
// matter here: filename, content, and id (the SHA-1 of the content). As in
// the real provider, a file that is gone or whose content changed is read
// as gone, so terraform plans to write it again; a refresh-only run
// records that in the state instead.
type fileResource struct{}

type fileModel struct {
	ID       types.String `tfsdk:"id"`
	Filename types.String `tfsdk:"filename"`
	Content  types.String `tfsdk:"content"`
}

func (r *fileResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_file"
}

func (r *fileResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "A file on the machine where terraform runs.",
		Attributes: map[string]schema.Attribute{
			"filename": schema.StringAttribute{Required: true, PlanModifiers: replace,
				Description: "Path of the file to write."},
			"content": schema.StringAttribute{Optional: true, PlanModifiers: replace,
				Description: "What the file holds."},
			"id": schema.StringAttribute{Computed: true,
				Description:   "The SHA-1 of the content, in hex.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		},
	}
}

func checksum(b []byte) string {
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:])
}

func (r *fileResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m fileModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name, content := m.Filename.ValueString(), []byte(m.Content.ValueString())
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		resp.Diagnostics.AddError("Cannot create the file's directory", err.Error())
		return
	}
	if err := os.WriteFile(name, content, 0o644); err != nil {
		resp.Diagnostics.AddError("Cannot write the file", err.Error())
		return
	}
	m.ID = types.StringValue(checksum(content))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Read drops the resource from the state when the file is gone or no longer
// holds what terraform wrote.
func (r *fileResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m fileModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	b, err := os.ReadFile(m.Filename.ValueString())
	if errors.Is(err, os.ErrNotExist) || (err == nil && checksum(b) != m.ID.ValueString()) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the file", err.Error())
	}
}

// Update is never planned: every attribute forces a replacement.
func (r *fileResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	resp.Diagnostics.AddError("local_file cannot be updated in place", "every change replaces it")
}

func (r *fileResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m fileModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := os.Remove(m.Filename.ValueString()); err != nil && !errors.Is(err, os.ErrNotExist) {
		resp.Diagnostics.AddError("Cannot delete the file", err.Error())
	}
}
