package e2e

import (
	"context"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestCLIShowsAFailedApply: an auto-approved `terraform apply` whose apply
// fails at once prints the apply's error and exits non-zero.
//
// The cloud backend reads the run right after it has read the plan's log
// and, for structured run output, the plan's JSON. A run that is already
// errored then ends the command without showing the apply's log at all:
// exit status 1 and no word of why. Terrace applies in the plan's job, so
// an apply that fails in a few hundred milliseconds used to be over before
// the CLI looked. Each engine tries twice, with structured run
// output on and off, since the failure this guards against was a race.
func TestCLIShowsAFailedApply(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	e := testenv.New(t, testenv.Options{})
	c := e.Client
	ctx := context.Background()
	const org = "acme"
	testenv.NewOrg(t, c, org)
	for _, eng := range engines(t) {
		for _, sro := range []bool{true, false} {
			name := strings.ReplaceAll(eng.Label(), ".", "-")
			if sro {
				name += "-sro"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel() // a workspace of its own; see parallel in TestMain
				if _, err := c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String(name),
					TerraformVersion: tfe.String(eng.Version), StructuredRunOutputEnabled: tfe.Bool(sro)}); err != nil {
					t.Fatal(err)
				}
				cl := newEngineCLI(t, e, eng)
				dir := writeConfig(t, map[string]string{"main.tf": cloudBlock(e.Host, org, name) + `
resource "terraform_data" "broken" {
  input = timestamp()
  provisioner "local-exec" {
    command = "echo the-provisioner-failed-on-purpose >&2; exit 3"
  }
}
`})
				cl.run(dir, "init")
				for i := range 2 {
					out, errOut, err := cl.try(dir, "apply", "-auto-approve")
					if err == nil {
						t.Fatalf("try %d: terraform apply of a failing provisioner succeeded:\n%s", i, out)
					}
					all := out + errOut
					if !strings.Contains(all, "local-exec provisioner error") || !strings.Contains(all, "the-provisioner-failed-on-purpose") {
						t.Fatalf("try %d: terraform apply failed (%v) without showing the apply's error:\nstdout:\n%s\nstderr:\n%s", i, err, out, errOut)
					}
				}
			})
		}
	}
}
