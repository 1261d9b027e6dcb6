// Package copytest checks the copies a domain hands out of what a
// request memo or a cache keeps: a caller changing its copy must not
// change anyone else's.
package copytest

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// SharesNothing fails t when copy shares a pointer, map or slice with
// orig (both pointers to the same struct type), found by reflection
// through pointers, maps, slices and structs, or when the copy's values
// differ.
// Every pointer, map and slice of orig must be set, so that a field added
// later fails the test until the test sets it and the copy copies it.
func SharesNothing(t testing.TB, orig, copy any) {
	t.Helper()
	a, b := reflect.ValueOf(orig), reflect.ValueOf(copy)
	if a.Type() != b.Type() || a.Kind() != reflect.Pointer {
		t.Fatalf("SharesNothing compares two pointers of one type, not %T and %T", orig, copy)
	}
	if !reflect.DeepEqual(orig, copy) {
		t.Errorf("the copy differs from the original: %+v", copy)
	}
	walk(t, a.Elem(), b.Elem(), a.Elem().Type().Name())
}

func walk(t testing.TB, a, b reflect.Value, path string) {
	t.Helper()
	if a.Type() == reflect.TypeFor[time.Time]() {
		return // a value; its location is shared by every time in it
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice:
		if a.IsNil() {
			t.Errorf("%s is not set in the test's original: set it, and make the copy copy it", path)
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("the copy shares %s with the original", path)
			return
		}
		switch a.Kind() {
		case reflect.Pointer:
			walk(t, a.Elem(), b.Elem(), path)
		case reflect.Map:
			for _, k := range a.MapKeys() {
				walk(t, a.MapIndex(k), b.MapIndex(k), fmt.Sprintf("%s[%v]", path, k))
			}
		case reflect.Slice:
			// The copies are equal (DeepEqual above), so of one length.
			for i := range a.Len() {
				walk(t, a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i))
			}
		}
	case reflect.Struct:
		for i := range a.NumField() {
			walk(t, a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name)
		}
	}
}
