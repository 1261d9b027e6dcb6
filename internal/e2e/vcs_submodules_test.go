package e2e

import (
	"context"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestVCSSubmodules: a workspace connected with ingress-submodules runs
// the commit with its submodules' files (a module a gitlink brings in,
// at the commit the gitlink records), as HCP Terraform does, and a
// policy set whose policies folder is a submodule enforces its policy;
// the same repository connected without it runs without them (the plan
// cannot find the module). Real Gitea, git, terraform and OPA.
func TestVCSSubmodules(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	ctx := context.Background()
	e, g := testenv.NewWithGitea(t, testenv.Options{})
	lib := g.CreateRepo(t, "lib")
	libSHA := g.Push(t, lib, "main", map[string]string{"main.tf": `
variable "name" { type = string }
resource "terraform_data" "label" { input = "${var.name}-from-lib-v1" }
output "label" { value = terraform_data.label.output }
`}, "lib v1")
	g.Push(t, lib, "main", map[string]string{"main.tf": "# lib v2: not the commit the gitlink records\n"}, "lib v2")
	infra := g.CreateRepo(t, "infra")
	g.PushGitlinks(t, infra, map[string]string{"main.tf": `
module "lib" {
  source = "./modules/lib"
  name   = "app"
}
output "label" { value = module.lib.label }
`}, "[submodule \"lib\"]\n\tpath = modules/lib\n\turl = ../lib.git\n", map[string]string{"modules/lib": libSHA})

	c := e.Client
	testenv.NewOrg(t, c, "acme")
	oc := g.Provider(t, c, "acme")
	connect := func(name string, submodules bool) *tfe.Workspace {
		ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name), AutoApply: tfe.Bool(true), QueueAllRuns: tfe.Bool(true),
			VCSRepo: &tfe.VCSRepoOptions{Identifier: tfe.String(infra), OAuthTokenID: tfe.String(oc.OAuthTokens[0].ID), IngressSubmodules: tfe.Bool(submodules)}})
		if err != nil {
			t.Fatal(err)
		}
		if ws.VCSRepo == nil || ws.VCSRepo.IngressSubmodules != submodules {
			t.Fatalf("workspace %s's vcs-repo: %+v, want ingress-submodules %v", name, ws.VCSRepo, submodules)
		}
		return ws
	}
	with := connect("with-submodules", true)
	r := testenv.WaitRun(ctx, t, c, waitNthRun(ctx, t, c, with.ID, 1).ID, tfe.RunApplied, tfe.RunErrored)
	if r.Status != tfe.RunApplied {
		t.Fatalf("the run of the commit with its submodule: %s", r.Status)
	}
	outs, err := c.StateVersionOutputs.ReadCurrent(ctx, with.ID)
	if err != nil || len(outs.Items) != 1 || outs.Items[0].Value != "app-from-lib-v1" {
		t.Fatalf("the outputs: %+v, %v (want label = app-from-lib-v1, from the submodule's recorded commit)", outs, err)
	}

	// A policy set whose policies folder is a submodule.
	shared := g.CreateRepo(t, "shared-policies")
	sharedSHA := g.Push(t, shared, "main", map[string]string{"guard.rego": denyForbidden,
		"policies.hcl": "policy \"guard\" {\n  query             = \"data.terraform.guard.deny\"\n  enforcement_level = \"mandatory\"\n}\n"}, "guard")
	polRepo := g.CreateRepo(t, "policies")
	g.PushGitlinks(t, polRepo, map[string]string{"README.md": "# policies\n"},
		"[submodule \"shared\"]\n\tpath = policies\n\turl = ../shared-policies.git\n", map[string]string{"policies": sharedSHA})
	guarded, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("guarded"), AutoApply: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := c.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("shared"), Kind: tfe.OPA,
		PoliciesPath: tfe.String("policies"), Workspaces: []*tfe.Workspace{guarded},
		VCSRepo: &tfe.VCSRepoOptions{Identifier: tfe.String(polRepo), OAuthTokenID: tfe.String(oc.OAuthTokens[0].ID), IngressSubmodules: tfe.Bool(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if ps.VCSRepo == nil || !ps.VCSRepo.IngressSubmodules {
		t.Fatalf("the policy set's vcs-repo: %+v, want ingress-submodules", ps.VCSRepo)
	}
	waitFor(t, 60*time.Second, "the policy set's version of the branch head", func() bool {
		s, err := c.PolicySets.Read(ctx, ps.ID)
		return err == nil && s.CurrentVersion != nil
	})
	r = createRun(ctx, t, c, guarded.ID, uploadConfig(ctx, t, c, guarded.ID, forbiddenConfig).ID, nil)
	if r = waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunErrored, tfe.RunApplied); r.Status != tfe.RunErrored {
		t.Fatalf("a run the submodule's mandatory policy denies ended %s", r.Status)
	}

	without := connect("without-submodules", false)
	r = testenv.WaitRun(ctx, t, c, waitNthRun(ctx, t, c, without.ID, 1).ID, tfe.RunApplied, tfe.RunErrored, tfe.RunPlannedAndFinished)
	if r.Status != tfe.RunErrored {
		t.Fatalf("the run of the commit without its submodule: %s, want errored (the module is missing)", r.Status)
	}
}
