package audit_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

const moduleCode = `
variable "region" { type = string }
resource "terraform_data" "net" { input = var.region }
`

func tgz(t *testing.T, name, body string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(body)); err != nil {
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

// trail lists the whole audit trail with token and returns it with the
// raw response body.
func trail(t *testing.T, e *testenv.Env, token string) ([]*tfe.AuditTrail, string) {
	return trailAt(t, e, token, "/api/v2/organization/audit-trail")
}

func trailAt(t *testing.T, e *testenv.Env, token, path string) ([]*tfe.AuditTrail, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("audit trail: %d %s", resp.StatusCode, body)
	}
	var list tfe.AuditTrailList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	return list.Items, string(body)
}

func find(events []*tfe.AuditTrail, typ, id, action string) *tfe.AuditTrail {
	for _, ev := range events {
		if ev.Resource.Type == typ && ev.Resource.ID == id && ev.Resource.Action == action {
			return ev
		}
	}
	return nil
}

// TestAuditTrailRecordsWhoDidWhat walks seed 000's no-code provisioning and
// checks that the trail names who created the workspace, that a state
// read is recorded, that no secret reaches a record, and that an
// audit-trails token reads its organization's trail and nothing else.
func TestAuditTrailRecordsWhoDidWhat(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		const org = "acme"
		testenv.NewOrg(t, e.Client, org)
		testenv.NewOrg(t, e.Client, "other")
		teams, err := e.Client.Teams.List(ctx, org, nil)
		if err != nil || len(teams.Items) != 1 {
			t.Fatalf("teams: %v %v", teams, err)
		}
		user, m := e.UserClient(t, org, "platform@acme.test", teams.Items[0])
		ot, err := e.Client.OrganizationTokens.Create(ctx, org)
		if err != nil {
			t.Fatal(err)
		}
		at, err := e.Client.OrganizationTokens.CreateWithOptions(ctx, org, tfe.OrganizationTokenCreateOptions{TokenType: tfe.Ptr(tfe.AuditTrailToken)})
		if err != nil {
			t.Fatal(err)
		}

		// Seed 000: publish a module, make it no-code, create a workspace from it.
		rm, err := user.RegistryModules.Create(ctx, org, tfe.RegistryModuleCreateOptions{Name: tfe.String("network"), Provider: tfe.String("aws")})
		if err != nil {
			t.Fatal(err)
		}
		v, err := user.RegistryModules.CreateVersion(ctx, tfe.RegistryModuleID{Organization: org, Name: "network", Provider: "aws", Namespace: org, RegistryName: tfe.PrivateRegistry},
			tfe.RegistryModuleCreateVersionOptions{Version: tfe.String("1.0.0")})
		if err != nil {
			t.Fatal(err)
		}
		if err := user.RegistryModules.UploadTarGzip(ctx, v.Links["upload"].(string), bytes.NewReader(tgz(t, "main.tf", moduleCode))); err != nil {
			t.Fatal(err)
		}
		ncm, err := user.RegistryNoCodeModules.Create(ctx, org, tfe.RegistryNoCodeModuleCreateOptions{RegistryModule: rm, Enabled: tfe.Bool(true), VersionPin: "1.0.0"})
		if err != nil {
			t.Fatal(err)
		}
		ws, err := user.RegistryNoCodeModules.CreateWorkspace(ctx, ncm.ID, &tfe.RegistryNoCodeModuleCreateWorkspaceOptions{
			Name: "customer-acme", Variables: []*tfe.Variable{{Key: "region", Value: "us-east-1", Category: tfe.CategoryTerraform}},
		})
		if err != nil {
			t.Fatal(err)
		}
		// A sensitive variable and a state whose output is sensitive.
		const secret, outputSecret = "hunter2-variable-value", "hunter2-output-value"
		vr, err := user.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("db_password"), Value: tfe.String(secret), Category: tfe.Category(tfe.CategoryEnv), Sensitive: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		other, err := e.Client.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("plain")})
		if err != nil {
			t.Fatal(err)
		}
		state := fmt.Sprintf(`{"version":4,"terraform_version":"1.9.5","serial":1,"lineage":"2f4a1d0e-6b1c-4c52-9d0b-1a2b3c4d5e6f","outputs":{"pw":{"value":%q,"type":"string","sensitive":true}},"resources":[]}`, outputSecret)
		if _, err := user.Workspaces.Lock(ctx, other.ID, tfe.WorkspaceLockOptions{}); err != nil {
			t.Fatal(err)
		}
		sv, err := user.StateVersions.Create(ctx, other.ID, tfe.StateVersionCreateOptions{Serial: tfe.Int64(1), MD5: tfe.String(fmt.Sprintf("%x", md5.Sum([]byte(state)))),
			Lineage: tfe.String("2f4a1d0e-6b1c-4c52-9d0b-1a2b3c4d5e6f"), State: tfe.String(base64.StdEncoding.EncodeToString([]byte(state)))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := user.Workspaces.Unlock(ctx, other.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := user.StateVersions.ReadCurrent(ctx, other.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := user.StateVersions.List(ctx, &tfe.StateVersionListOptions{Organization: org, Workspace: "plain"}); err != nil {
			t.Fatal(err)
		}
		// Team and organization tokens are named as such.
		tt, err := e.Client.TeamTokens.Create(ctx, teams.Items[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		byTeam, err := e.NewClient(t, tt.Token).Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("by-team")})
		if err != nil {
			t.Fatal(err)
		}
		byOrg, err := e.NewClient(t, ot.Token).Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("by-org-token")})
		if err != nil {
			t.Fatal(err)
		}
		// Something in another organization, which acme's trail must not show.
		otherWS, err := e.Client.Workspaces.Create(ctx, "other", tfe.WorkspaceCreateOptions{Name: tfe.String("elsewhere")})
		if err != nil {
			t.Fatal(err)
		}

		events, body := trail(t, e, at.Token)
		created := find(events, "workspace", ws.ID, "create")
		if created == nil {
			t.Fatalf("the no-code workspace's creation is not in the trail:\n%s", body)
		}
		if created.Auth.AccessorID != m.User.ID || created.Auth.Description != m.User.Username || created.Auth.OrganizationID == "" ||
			created.Request.ID == "" || created.Resource.Meta["parent-type"] != "no-code-module" || created.Resource.Meta["parent-id"] != ncm.ID {
			t.Fatalf("creation event = %+v", created)
		}
		if ev := find(events, "workspace", byTeam.ID, "create"); ev == nil || ev.Auth.AccessorID != teams.Items[0].ID || !strings.Contains(body, `"accessor_type":"team"`) {
			t.Fatalf("the team token's write is not named as the team's: %+v", ev)
		}
		if ev := find(events, "workspace", byOrg.ID, "create"); ev == nil || ev.Auth.AccessorID != ot.ID || !strings.Contains(body, `"accessor_type":"organization"`) {
			t.Fatalf("the organization token's write is not named as the token's: %+v", ev)
		}
		if !strings.Contains(body, `"client_ip":"127.0.0.1"`) || !strings.Contains(body, `"user_agent":"go-tfe"`) {
			t.Fatalf("the trail does not say where requests came from:\n%s", body)
		}
		if find(events, "var", vr.ID, "create") == nil || find(events, "state-version", sv.ID, "create") == nil ||
			find(events, "workspace", other.ID, "lock") == nil || find(events, "authentication-token", at.ID, "create") == nil {
			t.Fatalf("a write is missing from the trail:\n%s", body)
		}
		if find(events, "workspace", other.ID, "read-current-state-version") == nil || find(events, "state-version", "", "list") == nil {
			t.Fatalf("the state read is not in the trail:\n%s", body)
		}
		if strings.Contains(body, otherWS.ID) {
			t.Fatalf("acme's trail shows another organization's workspace:\n%s", body)
		}
		siteEvents, site := trailAt(t, e, e.Token, "/api/v2/admin/audit-trail")
		if find(siteEvents, "organization", "other", "create") == nil || find(siteEvents, "workspace", otherWS.ID, "create") == nil {
			t.Fatalf("the site trail lacks the organization's creation or another organization's events:\n%s", site)
		}
		for _, s := range []string{secret, outputSecret, ot.Token, at.Token, tt.Token} {
			if strings.Contains(body, s) || strings.Contains(site, s) {
				t.Fatalf("a secret reached the trail: %q", s)
			}
		}
		// Nor the stored records, in any column.
		rows, err := e.Server.DB.Query(ctx, `SELECT actor_name, resource_id, meta, user_agent FROM audit_events`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var a, b, c, d string
			if err := rows.Scan(&a, &b, &c, &d); err != nil {
				t.Fatal(err)
			}
			if row := a + b + c + d; strings.Contains(row, secret) || strings.Contains(row, outputSecret) || strings.Contains(row, "atlasv1") {
				t.Fatalf("a stored event holds a secret: %s", row)
			}
		}

		// The organization token reads the same trail; user tokens cannot,
		// and the audit-trails token can read nothing else.
		if evs, _ := trail(t, e, ot.Token); len(evs) < len(events) {
			t.Fatalf("the organization token sees %d events, the audit-trails token %d", len(evs), len(events))
		}
		_, err = user.AuditTrails.List(ctx, nil)
		testenv.WantStatus(t, "the trail with a user token", err, "forbidden")
		auditClient := e.NewClient(t, at.Token)
		_, err = auditClient.Workspaces.List(ctx, org, nil)
		testenv.WantErr(t, "listing workspaces with an audit-trails token", err, tfe.ErrUnauthorized)
		_, err = auditClient.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("sneaky")})
		testenv.WantErr(t, "creating a workspace with an audit-trails token", err, tfe.ErrUnauthorized)
		if _, err := e.Client.Workspaces.Read(ctx, org, "sneaky"); err == nil {
			t.Fatal("an audit-trails token created a workspace")
		}
	})
}

// TestRenameIsInTheRenamedTrail: renaming an organization through the API
// is recorded in its trail, which its audit-trails token reads under the
// new name (the event was looked up by the old name, which finds no
// organization once renamed, and went to no trail).
func TestRenameIsInTheRenamedTrail(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "acme")
		at, err := e.Client.OrganizationTokens.CreateWithOptions(ctx, "acme", tfe.OrganizationTokenCreateOptions{TokenType: tfe.Ptr(tfe.AuditTrailToken)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.Organizations.Update(ctx, "acme", tfe.OrganizationUpdateOptions{Name: tfe.String("acme-corp")}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.Organizations.Update(ctx, "acme-corp", tfe.OrganizationUpdateOptions{Email: tfe.String("ops@acme-corp.test")}); err != nil {
			t.Fatal(err)
		}
		events, body := trail(t, e, at.Token)
		var updates int
		for _, ev := range events {
			if ev.Resource.Type == "organization" && ev.Resource.Action == "update" {
				updates++
			}
		}
		if updates != 2 {
			t.Fatalf("organization updates in the renamed organization's trail: %d, want the rename and the change after it\n%s", updates, body)
		}
	})
}
