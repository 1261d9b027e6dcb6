package authz_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

func moduleArchive(t *testing.T) []byte {
	const mainTF = `variable "region" { type = string }
resource "terraform_data" "net" { input = var.region }
output "label" { value = terraform_data.net.output }
`
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "main.tf", Mode: 0o644, Size: int64(len(mainTF)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(mainTF)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSeedFlowByTeamToken walks seed 000 (publish a module, make it
// no-code, provision a workspace into a project) with a team token whose
// team has manage-modules and a project grant that creates workspaces
// (maintain), and with a team that has neither. A write grant is not
// enough: write does not create workspaces (its workspace-access.create is
// false), and the team is refused until its grant is raised.
func TestSeedFlowByTeamToken(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform: skipped with -short")
	}
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "acme")
		prj := must(c.Projects.Create(ctx, org.Name, tfe.ProjectCreateOptions{Name: "customers"}))(t)
		platform := must(c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String("platform"),
			OrganizationAccess: &tfe.OrganizationAccessOptions{ManageModules: tfe.Bool(true)}}))(t)
		grant := must(c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessWrite, Team: platform, Project: prj}))(t)
		bystanders := must(c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String("bystanders")}))(t)
		team := e.NewClient(t, must(c.TeamTokens.Create(ctx, platform.ID))(t).Token)
		other := e.NewClient(t, must(c.TeamTokens.Create(ctx, bystanders.ID))(t).Token)

		// Without manage-modules nothing can be published.
		if _, err := other.RegistryModules.Create(ctx, org.Name, tfe.RegistryModuleCreateOptions{Name: tfe.String("network"), Provider: tfe.String("aws")}); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Fatalf("a team without manage-modules published: %v", err)
		}
		rm := must(team.RegistryModules.Create(ctx, org.Name, tfe.RegistryModuleCreateOptions{Name: tfe.String("network"), Provider: tfe.String("aws")}))(t)
		id := tfe.RegistryModuleID{Organization: org.Name, Name: "network", Provider: "aws", Namespace: org.Name, RegistryName: tfe.PrivateRegistry}
		v := must(team.RegistryModules.CreateVersion(ctx, id, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String("1.0.0")}))(t)
		if err := team.RegistryModules.UploadTarGzip(ctx, v.Links["upload"].(string), bytes.NewReader(moduleArchive(t))); err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			got := must(team.RegistryModules.ReadVersion(ctx, id, "1.0.0"))(t)
			if got.Status == tfe.RegistryModuleVersionStatusOk {
				break
			}
			if i > 300 {
				t.Fatalf("module version is %s", got.Status)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, err := other.RegistryNoCodeModules.Create(ctx, org.Name, tfe.RegistryNoCodeModuleCreateOptions{RegistryModule: rm, Enabled: tfe.Bool(true)}); err == nil {
			t.Fatal("a team without manage-modules made a module no-code")
		}
		ncm := must(team.RegistryNoCodeModules.Create(ctx, org.Name, tfe.RegistryNoCodeModuleCreateOptions{RegistryModule: rm, Enabled: tfe.Bool(true), VersionPin: "1.0.0"}))(t)

		region := &tfe.Variable{Key: "region", Value: "eu-west-1", Category: tfe.CategoryTerraform}
		if _, err := other.RegistryNoCodeModules.CreateWorkspace(ctx, ncm.ID, &tfe.RegistryNoCodeModuleCreateWorkspaceOptions{Name: "nope", Project: prj, Variables: []*tfe.Variable{region}}); err == nil {
			t.Fatal("a team without access to the project provisioned a workspace into it")
		}
		if grant.WorkspaceAccess == nil || grant.WorkspaceAccess.WorkspaceCreatePermission {
			t.Fatalf("a write grant says workspace-access %+v, want create false", grant.WorkspaceAccess)
		}
		if _, err := team.RegistryNoCodeModules.CreateWorkspace(ctx, ncm.ID, &tfe.RegistryNoCodeModuleCreateWorkspaceOptions{Name: "write-only", Project: prj, Variables: []*tfe.Variable{region}}); err == nil {
			t.Fatal("a team with a write grant on the project provisioned a workspace into it")
		}
		if _, err := team.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("write-only"), Project: prj}); err == nil {
			t.Fatal("a team with a write grant on the project created a workspace in it")
		}
		must(c.TeamProjectAccess.Update(ctx, grant.ID, tfe.TeamProjectAccessUpdateOptions{Access: tfe.ProjectAccess(tfe.TeamProjectAccessMaintain)}))(t)
		ws := must(team.RegistryNoCodeModules.CreateWorkspace(ctx, ncm.ID, &tfe.RegistryNoCodeModuleCreateWorkspaceOptions{Name: "customer-a", Project: prj, Variables: []*tfe.Variable{region}}))(t)
		if ws.Project == nil || ws.Project.ID != prj.ID {
			t.Fatalf("provisioned into %+v, want %s", ws.Project, prj.ID)
		}
		// The team may follow its run: it has access through the project
		// grant.
		for i := 0; ; i++ {
			w := must(team.Workspaces.ReadByID(ctx, ws.ID))(t)
			if w.CurrentRun != nil {
				r := must(team.Runs.Read(ctx, w.CurrentRun.ID))(t)
				if r.Status == tfe.RunApplied || r.Status == tfe.RunPlanned {
					break
				}
				if r.Status == tfe.RunErrored {
					t.Fatalf("the provisioning run errored")
				}
			}
			if i > 1200 {
				t.Fatal("the provisioning run did not finish")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
