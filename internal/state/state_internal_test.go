package state

import (
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core/copytest"
)

func TestParseStateOutputsAndSummary(t *testing.T) {
	raw := []byte(`{"version":4,"terraform_version":"1.3.6","serial":5,"lineage":"L","outputs":{
		"s":{"value":"x","type":"string","sensitive":true},
		"t":{"value":[1,"a"],"type":["tuple",["number","string"]]},
		"m":{"value":{"a":1},"type":["map","number"]},
		"legacy":{"value":{"k":[true]}}},
		"resources":[
		{"module":"module.net","mode":"managed","type":"aws_vpc","name":"main","provider":"provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{},{}]},
		{"mode":"managed","type":"terraform_data","name":"d","provider":"provider[\"terraform.io/builtin/terraform\"]","instances":[{}]},
		{"mode":"data","type":"aws_ami","name":"u","provider":"provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{}]}]}`)
	p, err := parseState(raw, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.serial != 5 || p.lineage != "L" || p.formatVersion != 4 || p.terraformVersion != "1.3.6" {
		t.Fatalf("header: %+v", p)
	}
	got := map[string]*Output{}
	for _, o := range p.outputs {
		got[o.Name] = o
	}
	for name, want := range map[string][2]string{
		"s":      {"string", `"string"`},
		"t":      {"array", `["tuple",["number","string"]]`},
		"m":      {"hash", `["map","number"]`},
		"legacy": {"hash", `["object",{"k":["tuple",["bool"]]}]`},
	} {
		o := got[name]
		if o == nil || o.Type != want[0] || string(o.DetailedType) != want[1] {
			t.Errorf("%s: %+v (detailed %s), want %v", name, o, o.DetailedType, want)
		}
	}
	if !got["s"].Sensitive || got["t"].Sensitive {
		t.Error("sensitive flags")
	}
	s := p.summary
	if s.ResourceCount != 3 || s.BillableRUM != 2 || len(s.Resources) != 3 {
		t.Fatalf("summary: %+v", s)
	}
	if s.Modules["module.net"]["aws_vpc"] != 2 || s.Modules["root"]["data.aws_ami"] != 1 {
		t.Fatalf("modules: %+v", s.Modules)
	}

	// The JSON outputs fill in a missing type.
	p, err = parseState([]byte(`{"version":4,"serial":1,"outputs":{"x":{"value":[1]}}}`), 1<<20, []byte(`{"x":{"value":[1],"type":["list","number"]}}`))
	if err != nil || string(p.outputs[0].DetailedType) != `["list","number"]` {
		t.Fatalf("fallback type: %v %s", err, p.outputs[0].DetailedType)
	}
}

func TestParseStateRefuses(t *testing.T) {
	for _, bad := range []string{``, `null`, `"x"`, `{"version":"4","serial":1}`, `{"version":4}`, `{"version":4,"serial":-1}`, `{"version":4,"serial":1}{}`} {
		if _, err := parseState([]byte(bad), 1<<20, nil); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if _, err := parseState([]byte(`{"version":4,"serial":1,"lineage":"`+strings.Repeat("x", 100)+`"}`), 50, nil); err == nil || !strings.Contains(err.Error(), "larger") {
		t.Errorf("size limit: %v", err)
	}
}

func TestParseResources(t *testing.T) {
	rs, err := parseResources("ws-1", []byte(`{"resources":[
		{"module":"module.a.module.b","mode":"managed","type":"aws_s3_bucket","name":"this","provider":"provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{"index_key":"k"},{"index_key":"j"}]},
		{"mode":"managed","type":"null_resource","name":"n","provider":"provider[\"registry.terraform.io/hashicorp/null\"]","instances":[{}]},
		{"mode":"data","type":"aws_ami","name":"u","instances":[{}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 {
		t.Fatalf("%d resources", len(rs))
	}
	if r := rs[0]; r.Address != `a.b.aws_s3_bucket.this["k"]` || r.Module != "a.b" || r.NameIndex != "k" || r.Provider != "hashicorp/aws" {
		t.Fatalf("%+v", r)
	}
	if r := rs[2]; r.Address != "null_resource.n" || r.HasIndex || r.Module != "root" {
		t.Fatalf("%+v", r)
	}
	if rs[0].ID == rs[1].ID || !strings.HasPrefix(rs[0].ID, "wsr-") {
		t.Fatal("resource ids")
	}
}

func TestHoldsLock(t *testing.T) {
	user := &auth.Principal{Kind: auth.KindUser, UserID: "user-a", TokenID: "at-1"}
	admin := &auth.Principal{Kind: auth.KindUser, UserID: "user-admin", SiteAdmin: true, TokenID: "at-2"}
	team := &auth.Principal{Kind: auth.KindTeam, TeamID: "team-t", TokenID: "at-3"}
	run := &auth.Principal{Kind: auth.KindRun, RunID: "run-r", WorkspaceID: "ws-1", TokenID: "at-4"}
	org := &auth.Principal{Kind: auth.KindOrganization, Organization: "acme", TokenID: "at-5"}
	for _, c := range []struct {
		p      *auth.Principal
		holder string
		want   bool
	}{
		{user, "user-a", true}, {user, "user-b", false}, {user, "", false},
		{admin, "user-a", false}, {admin, "user-admin", true},
		{team, "team-t", true}, {team, "user-a", false},
		{run, "run-r", true}, {run, "run-other", false},
		{org, "at-5", true}, {org, "user-a", false},
		{nil, "user-a", false},
	} {
		if got := HoldsLock(c.p, c.holder); got != c.want {
			t.Errorf("HoldsLock(%+v, %q) = %v", c.p, c.holder, got)
		}
	}
}

// TestVersionCloneSharesNothing: what the request memo hands out
// (getVersion) is a copy a caller may change without changing the memo's.
// Every pointer, map and slice of the version is set here: a new one fails
// this test until it is set here and the copy copies it.
func TestVersionCloneSharesNothing(t *testing.T) {
	at := time.Now()
	v := &Version{ID: "sv-1", FinalizedAt: &at, jsonOutputs: []byte(`{}`), Summary: Summary{
		Resources: []ResourceSummary{{Name: "a", Count: 1}},
		Modules:   map[string]map[string]int{"root": {"terraform_data": 1}},
		Providers: map[string]map[string]int{"terraform": {"terraform_data": 1}},
	}}
	copytest.SharesNothing(t, v, v.clone())
}
