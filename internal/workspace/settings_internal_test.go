package workspace

import (
	"reflect"
	"testing"
	"time"
)

// TestSettingsCopyIsDeep: Settings.copy shares nothing with what it
// copies, and every field that could be shared (a pointer, slice, map or
// interface) is one copy knows: a new such field must be copied there
// too, or the settings remembered by decodedSettings would change under a
// caller that changes its copy.
func TestSettingsCopyIsDeep(t *testing.T) {
	known := map[string]bool{"AutoDestroyAt": true, "TriggerPrefixes": true, "TriggerPatterns": true, "VCSRepo": true}
	typ := reflect.TypeFor[Settings]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		switch f.Type.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func:
			if !known[f.Name] {
				t.Errorf("Settings.%s (%s) is shared by a copy: copy must copy it", f.Name, f.Type)
			}
		}
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	orig := Settings{AutoDestroyAt: &at, TriggerPrefixes: []string{"a"}, TriggerPatterns: []string{"b"}, VCSRepo: &VCSRepo{Branch: "main"}}
	c := orig.copy()
	*c.AutoDestroyAt = at.Add(time.Hour)
	c.TriggerPrefixes[0], c.TriggerPatterns[0] = "x", "y"
	c.VCSRepo.Branch = "dev"
	if !orig.AutoDestroyAt.Equal(at) || orig.TriggerPrefixes[0] != "a" || orig.TriggerPatterns[0] != "b" || orig.VCSRepo.Branch != "main" {
		t.Errorf("changing a copy changed the original: %+v", orig)
	}
}

// TestDecodedSettingsAreCopies: a workspace read again and again from one
// settings document decodes the same settings each time, whatever the
// callers before did to theirs.
func TestDecodedSettingsAreCopies(t *testing.T) {
	attrs := `{"description":"d","trigger-prefixes":["p"],"auto-destroy-at":"2026-01-02T03:04:05Z","terraform-version":"1.11.4"}`
	row := func() fakeRow { return fakeRow{attrs: attrs} }
	// The first read decodes, the others find it remembered; each
	// changes what it got.
	for range 3 {
		w, err := scanWith(row())
		if err != nil {
			t.Fatal(err)
		}
		w.Settings.TriggerPrefixes[0] = "changed"
		*w.Settings.AutoDestroyAt = time.Time{}
		w.Settings.Description = "changed"
	}
	w, err := scanWith(row())
	if err != nil {
		t.Fatal(err)
	}
	s := w.Settings
	if s.Description != "d" || len(s.TriggerPrefixes) != 1 || s.TriggerPrefixes[0] != "p" || s.TriggerPatterns == nil ||
		s.AutoDestroyAt == nil || !s.AutoDestroyAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) || s.TerraformVersion != "1.11.4" || !s.SpeculativeEnabled {
		t.Errorf("the second read's settings %+v", s)
	}
}

// fakeRow scans like a row of cols with the settings document attrs.
type fakeRow struct{ attrs string }

func (r fakeRow) Scan(dest ...any) error {
	*dest[0].(*string), *dest[1].(*string), *dest[3].(*string) = "ws-x", "org", "w"
	*dest[7].(*string) = r.attrs
	return nil
}
