package team

import (
	"reflect"
	"testing"
)

// TestSettingsCopyIsDeep: Settings.copy shares nothing with what it
// copies, and every field that could be shared (a pointer, slice, map or
// interface, in Settings or the structs in it) is one copy knows: a new
// such field must be copied there too, or the settings remembered by
// decodedSettings would change under a caller that changes its copy.
func TestSettingsCopyIsDeep(t *testing.T) {
	known := map[string]bool{"AllowMemberTokenManagement": true}
	var walk func(typ reflect.Type)
	walk = func(typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			switch f.Type.Kind() {
			case reflect.Struct:
				walk(f.Type)
			case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func:
				if !known[f.Name] {
					t.Errorf("%s.%s (%s) is shared by a copy: copy must copy it", typ.Name(), f.Name, f.Type)
				}
			}
		}
	}
	walk(reflect.TypeFor[Settings]())
	v := true
	orig := Settings{AllowMemberTokenManagement: &v}
	c := orig.copy()
	*c.AllowMemberTokenManagement = false
	if !*orig.AllowMemberTokenManagement {
		t.Error("changing a copy changed the original")
	}
}

// TestDecodedSettingsAreCopies: a team read again and again from one
// settings document decodes the same settings each time, whatever the
// callers before did to theirs.
func TestDecodedSettingsAreCopies(t *testing.T) {
	attrs := `{"allow-member-token-management":true,"organization-access":{"manage-workspaces":true}}`
	for range 3 {
		tm, err := scanTeam(fakeRow{attrs})
		if err != nil {
			t.Fatal(err)
		}
		*tm.Settings.AllowMemberTokenManagement = false
		tm.Settings.Access.ManageWorkspaces = false
		tm.Settings.Visibility = "organization"
	}
	tm, err := scanTeam(fakeRow{attrs})
	if err != nil {
		t.Fatal(err)
	}
	s := tm.Settings
	if s.AllowMemberTokenManagement == nil || !*s.AllowMemberTokenManagement || !s.Access.ManageWorkspaces || s.Visibility != "secret" {
		t.Errorf("the last read's settings %+v", s)
	}
}

// fakeRow scans like a row of teamCols with the settings document attrs.
type fakeRow struct{ attrs string }

func (r fakeRow) Scan(dest ...any) error {
	*dest[0].(*string), *dest[1].(*string), *dest[2].(*string), *dest[3].(*string) = "team-x", "org", "devs", r.attrs
	return nil
}
