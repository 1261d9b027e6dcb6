package core

import "testing"

func TestBounded(t *testing.T) {
	b := Bounded[string, []int]{Max: 2, Copy: func(v []int) []int { return append([]int(nil), v...) }}
	in := []int{1}
	b.Put("a", in)
	in[0] = 9 // the caller's slice is not the remembered one
	got, ok := b.Get("a")
	if !ok || got[0] != 1 {
		t.Fatalf("Get(a) = %v, %v; want [1], true", got, ok)
	}
	got[0] = 7 // nor is what Get hands out
	if again, _ := b.Get("a"); again[0] != 1 {
		t.Fatalf("a value handed out changed the remembered one: %v", again)
	}
	b.Put("b", []int{2})
	b.Put("c", []int{3}) // past Max: starts again with only c
	if _, ok := b.Get("a"); ok {
		t.Error("a is still remembered past Max entries")
	}
	if v, ok := b.Get("c"); !ok || v[0] != 3 {
		t.Errorf("Get(c) = %v, %v; want [3], true", v, ok)
	}
	b.Forget("c")
	if _, ok := b.Get("c"); ok {
		t.Error("c is remembered after Forget")
	}
}
