package copytest

import (
	"fmt"
	"strings"
	"testing"
)

// recorder keeps what SharesNothing reports instead of failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

type item struct{ Tags []string }

type doc struct {
	Items []*item
	Names map[string]*item
}

func deep(d *doc) *doc {
	c := &doc{Names: map[string]*item{}}
	for _, it := range d.Items {
		c.Items = append(c.Items, &item{Tags: append([]string(nil), it.Tags...)})
	}
	for k, it := range d.Names {
		c.Names[k] = &item{Tags: append([]string(nil), it.Tags...)}
	}
	return c
}

func orig() *doc {
	return &doc{Items: []*item{{Tags: []string{"a"}}}, Names: map[string]*item{"x": {Tags: []string{"b"}}}}
}

// TestSharesNothing: a deep copy passes; a copy that shares what a slice's
// or a map's element points at is reported, by its path.
func TestSharesNothing(t *testing.T) {
	o := orig()
	var r recorder
	SharesNothing(&r, o, deep(o))
	if len(r.errs) != 0 {
		t.Errorf("a deep copy: %v", r.errs)
	}

	shallowItems := deep(o)
	shallowItems.Items = []*item{o.Items[0]} // a new slice, the same element
	r = recorder{}
	SharesNothing(&r, o, shallowItems)
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "doc.Items[0]") {
		t.Errorf("a copy sharing a slice's element: %v, want doc.Items[0] reported", r.errs)
	}

	shallowTags := deep(o)
	shallowTags.Names["x"].Tags = o.Names["x"].Tags
	r = recorder{}
	SharesNothing(&r, o, shallowTags)
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "doc.Names[x].Tags") {
		t.Errorf("a copy sharing a map element's slice: %v, want doc.Names[x].Tags reported", r.errs)
	}
}
