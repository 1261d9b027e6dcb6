package tfeapi

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/jsonapi"
)

// Every API response is a JSON:API document. The generic way to write one
// (hashicorp/jsonapi, then encoding/json) walks the model by reflection
// into maps of attributes and relationships, visits every related model
// whole for an "included" list that Respond then replaces, and encodes the
// maps again, sorting their keys. The encoder here writes the same bytes
// in one pass, from a plan made once per model type: the document's
// fields in the order encoding/json writes the maps (by name), each with
// how its value is written.
//
// It writes exactly what the generic path writes or declines: a model
// type with a shape it does not know (a nested jsonapi struct attribute,
// a client ID, relationship links or meta, a to-many polyrelation, …), or
// a value the generic path would refuse (a nil in a to-many relationship,
// invalid links), is left to the generic path, which says why. With
// TERRACE_JSONAPI_CHECK=1 (make test) every document is written both ways
// and a difference panics: the whole test suite holds the encoder to
// hashicorp/jsonapi's bytes for every model it renders.

// CheckEnv names the environment variable that makes every response be
// encoded both ways and compared.
const CheckEnv = "TERRACE_JSONAPI_CHECK"

var checkEncoder = os.Getenv(CheckEnv) != ""

// errDecline: the document is left to the generic encoder.
var errDecline = errors.New("left to hashicorp/jsonapi")

// modelPlan is how one model type (a struct with a jsonapi primary field,
// always reached through a pointer) is written.
type modelPlan struct {
	typ     []byte // the type member's JSON string
	id      int    // the primary field's index
	attrs   []attrPlan
	rels    []relPlan
	links   bool   // *T is jsonapi.Linkable
	decline string // non-empty: why the type is left to the generic path
}

type attrKind int

const (
	attrOther     attrKind = iota // encoding/json
	attrString                    // a string kind without its own marshaling
	attrBool                      // a bool kind without its own marshaling
	attrInt                       // a signed integer kind without its own marshaling
	attrUint                      // an unsigned integer kind without its own marshaling
	attrTime                      // time.Time
	attrTimePtr                   // *time.Time
	attrNullable                  // jsonapi.NullableAttr[T]: inner says how T is written
	attrStrings                   // a slice of a plain string kind
	attrStringMap                 // a map of plain string kinds to plain string kinds
)

type timeFormat int

const (
	timeUnix timeFormat = iota
	timeISO8601
	timeRFC3339
)

type attrPlan struct {
	name      string
	key       []byte // `"name":`
	index     int
	omitEmpty bool
	kind      attrKind
	format    timeFormat
	zero      any       // attrOther: the zero value, for omitempty
	inner     *attrPlan // attrNullable: the value's plan
}

type relPlan struct {
	name      string
	key       []byte // `"name":`
	index     int
	omitEmpty bool
	many      bool
	// poly: a polyrelation (to-one): the choice struct's candidate fields
	// (pointers to models) in field order; the first that is set is the
	// related model.
	poly       []int
	model      *modelPlan   // the related model's plan (not poly)
	polyModels []*modelPlan // poly: the candidates' plans
}

var (
	plans              sync.Map // reflect.Type (the struct) -> *modelPlan
	timeType           = reflect.TypeFor[time.Time]()
	timePtrType        = reflect.TypeFor[*time.Time]()
	linkableType       = reflect.TypeFor[jsonapi.Linkable]()
	jsonMarshaler      = reflect.TypeFor[json.Marshaler]()
	textMarshaler      = reflect.TypeFor[encoding.TextMarshaler]()
	declinedInterfaces = []reflect.Type{
		reflect.TypeFor[jsonapi.Metable](),
		reflect.TypeFor[jsonapi.RelationshipLinkable](),
		reflect.TypeFor[jsonapi.RelationshipMetable](),
	}
)

// planOf returns the plan of struct type t, making it (and the plans of
// the models it relates to) the first time.
func planOf(t reflect.Type) *modelPlan {
	if p, ok := plans.Load(t); ok {
		return p.(*modelPlan)
	}
	made := map[reflect.Type]*modelPlan{}
	p := compile(t, made)
	for mt, mp := range made {
		plans.LoadOrStore(mt, mp)
	}
	return p
}

// compile makes t's plan; made holds the plans being made (relationships
// may lead back to a type under way).
func compile(t reflect.Type, made map[reflect.Type]*modelPlan) *modelPlan {
	if p, ok := made[t]; ok {
		return p
	}
	if p, ok := plans.Load(t); ok {
		return p.(*modelPlan)
	}
	p := &modelPlan{id: -1}
	made[t] = p
	decline := func(format string, args ...any) *modelPlan {
		p.decline = fmt.Sprintf(format, args...)
		return p
	}
	if t.Kind() != reflect.Struct {
		return decline("%s is not a struct", t)
	}
	pt := reflect.PointerTo(t)
	for _, it := range declinedInterfaces {
		if pt.Implements(it) || t.Implements(it) {
			return decline("%s implements %s", t, it)
		}
	}
	if t.Implements(linkableType) {
		return decline("%s is Linkable by value", t)
	}
	p.links = pt.Implements(linkableType)
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("jsonapi")
		if tag == "" {
			continue
		}
		args := strings.Split(tag, ",")
		if args[0] == "links" {
			continue
		}
		if len(args) < 2 {
			return decline("%s.%s: tag %q", t, f.Name, tag)
		}
		switch args[0] {
		case "primary":
			if f.Type.Kind() != reflect.String || p.id >= 0 {
				return decline("%s.%s: a primary field that is not the one string", t, f.Name)
			}
			p.id, p.typ = i, quote(args[1])
		case "attr":
			a, why := attribute(f.Type, args)
			if why != "" {
				return decline("%s.%s: %s", t, f.Name, why)
			}
			a.index = i
			p.attrs = append(p.attrs, a)
		case "relation", "polyrelation":
			r := relPlan{name: args[1], key: key(args[1]), index: i, omitEmpty: len(args) > 2 && args[2] == "omitempty"}
			ft := f.Type
			if strings.HasPrefix(ft.Name(), "NullableRelationship[") {
				return decline("%s.%s: a nullable relationship", t, f.Name)
			}
			switch {
			case args[0] == "polyrelation":
				if ft.Kind() != reflect.Pointer || ft.Elem().Kind() != reflect.Struct {
					return decline("%s.%s: a polyrelation that is not a pointer to a choice struct", t, f.Name)
				}
				ct := ft.Elem()
				for j := range ct.NumField() {
					cf := ct.Field(j)
					if cf.Type.Kind() != reflect.Pointer {
						continue
					}
					if cf.Type.Elem().Kind() != reflect.Struct {
						return decline("%s.%s: choice %s is not a pointer to a struct", t, f.Name, cf.Name)
					}
					if !hasPrimary(cf.Type.Elem()) {
						continue
					}
					mp := compile(cf.Type.Elem(), made)
					r.poly, r.polyModels = append(r.poly, j), append(r.polyModels, mp)
				}
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Pointer && ft.Elem().Elem().Kind() == reflect.Struct:
				r.many, r.model = true, compile(ft.Elem().Elem(), made)
			case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
				r.model = compile(ft.Elem(), made)
			default:
				return decline("%s.%s: a relationship of type %s", t, f.Name, ft)
			}
			p.rels = append(p.rels, r)
		default:
			return decline("%s.%s: annotation %q", t, f.Name, args[0])
		}
	}
	if p.id < 0 {
		return decline("%s has no primary field", t)
	}
	// encoding/json writes a map's keys sorted.
	slices.SortFunc(p.attrs, func(a, b attrPlan) int { return strings.Compare(a.name, b.name) })
	slices.SortFunc(p.rels, func(a, b relPlan) int { return strings.Compare(a.name, b.name) })
	for i := 1; i < len(p.attrs); i++ {
		if p.attrs[i].name == p.attrs[i-1].name {
			return decline("%s: attribute %s twice", t, p.attrs[i].name)
		}
	}
	for i := 1; i < len(p.rels); i++ {
		if p.rels[i].name == p.rels[i-1].name {
			return decline("%s: relationship %s twice", t, p.rels[i].name)
		}
	}
	return p
}

// attribute plans an attribute of type ft tagged args ("attr", name,
// options…); why says why it cannot.
func attribute(ft reflect.Type, args []string) (attrPlan, string) {
	a := attrPlan{name: args[1], key: key(args[1])}
	for _, o := range args[2:] {
		switch o {
		case "omitempty":
			a.omitEmpty = true
		case "iso8601":
			a.format = timeISO8601
		case "rfc3339":
			if a.format != timeISO8601 { // iso8601 wins, as in jsonapi
				a.format = timeRFC3339
			}
		}
	}
	if strings.HasPrefix(ft.Name(), "NullableAttr[") && ft.Kind() == reflect.Map && ft.Key().Kind() == reflect.Bool {
		inner, why := attribute(ft.Elem(), args)
		if why != "" {
			return a, why
		}
		a.kind, a.inner = attrNullable, &inner
		return a, ""
	}
	switch ft {
	case timeType:
		a.kind = attrTime
		return a, ""
	case timePtrType:
		a.kind = attrTimePtr
		return a, ""
	}
	elem := ft
	if elem.Kind() == reflect.Pointer || elem.Kind() == reflect.Slice {
		elem = elem.Elem()
		if elem.Kind() == reflect.Pointer && ft.Kind() == reflect.Slice {
			elem = elem.Elem()
		}
	}
	if elem.Kind() == reflect.Struct && hasAnnotations(elem) {
		return a, "a nested jsonapi attribute"
	}
	switch k := ft.Kind(); {
	case custom(ft):
		a.kind = attrOther
	case k == reflect.Slice && plainString(ft.Elem()):
		a.kind = attrStrings
	case k == reflect.Map && plainString(ft.Key()) && plainString(ft.Elem()):
		a.kind = attrStringMap
	case k == reflect.String:
		a.kind = attrString
	case k == reflect.Bool:
		a.kind = attrBool
	case k >= reflect.Int && k <= reflect.Int64:
		a.kind = attrInt
	case k >= reflect.Uint && k <= reflect.Uint64:
		a.kind = attrUint
	default:
		a.kind = attrOther
	}
	if a.kind == attrOther {
		a.zero = reflect.Zero(ft).Interface()
	}
	return a, ""
}

// custom: t (or *t) marshals itself.
func custom(t reflect.Type) bool {
	return t.Implements(jsonMarshaler) || t.Implements(textMarshaler) ||
		reflect.PointerTo(t).Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(textMarshaler)
}

// plainString: encoding/json writes t as a JSON string of its value.
func plainString(t reflect.Type) bool { return t.Kind() == reflect.String && !custom(t) }

func hasAnnotations(t reflect.Type) bool {
	for i := range t.NumField() {
		if t.Field(i).Tag.Get("jsonapi") != "" {
			return true
		}
	}
	return false
}

func hasPrimary(t reflect.Type) bool {
	for i := range t.NumField() {
		args := strings.Split(t.Field(i).Tag.Get("jsonapi"), ",")
		if len(args) >= 2 && args[0] == "primary" {
			return true
		}
	}
	return false
}

func quote(s string) []byte { return appendString(nil, s) }

func key(name string) []byte { return append(quote(name), ':') }

// model returns the plan and struct value of a model given as a pointer
// to a struct (nil: not one).
func model(v any) (*modelPlan, reflect.Value, bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return nil, reflect.Value{}, false
	}
	p := planOf(rv.Elem().Type())
	if p.decline != "" {
		return nil, reflect.Value{}, false
	}
	return p, rv.Elem(), true
}

// appendNode writes the whole node of model sv (plan p).
func appendNode(b []byte, p *modelPlan, sv reflect.Value) ([]byte, error) {
	b, _ = appendTypeID(b, p, sv)
	var err error
	if b, err = appendAttrs(b, p, sv); err != nil {
		return nil, err
	}
	open := false
	for i := range p.rels {
		r := &p.rels[i]
		fv := sv.Field(r.index)
		if r.omitEmpty && (r.many && fv.Len() == 0 || !r.many && fv.IsNil()) {
			continue
		}
		var related *modelPlan
		var rv reflect.Value
		switch {
		case r.poly != nil:
			if fv.IsNil() {
				continue // jsonapi leaves a nil choice out, omitempty or not
			}
			for j, fi := range r.poly {
				if c := fv.Elem().Field(fi); !c.IsNil() {
					related, rv = r.polyModels[j], c.Elem()
					break
				}
			}
			if related == nil {
				return nil, errDecline // no choice set
			}
		case !r.many && !fv.IsNil():
			related, rv = r.model, fv.Elem()
		}
		if related != nil && related.decline != "" || r.many && r.model.decline != "" {
			return nil, errDecline
		}
		if open {
			b = append(b, ',')
		} else {
			b = append(b, `,"relationships":{`...)
			open = true
		}
		b = append(b, r.key...)
		switch {
		case r.many:
			b = append(b, `{"data":[`...)
			for k := range fv.Len() {
				e := fv.Index(k)
				if e.IsNil() {
					return nil, errDecline // jsonapi: ErrUnexpectedNil
				}
				if k > 0 {
					b = append(b, ',')
				}
				if b, err = appendShallow(b, r.model, e.Elem()); err != nil {
					return nil, err
				}
			}
			b = append(b, "]}"...)
		case related == nil:
			b = append(b, `{"data":null}`...)
		default:
			b = append(b, `{"data":`...)
			if b, err = appendShallow(b, related, rv); err != nil {
				return nil, err
			}
			b = append(b, '}')
		}
	}
	if open {
		b = append(b, '}')
	}
	if p.links {
		l := sv.Addr().Interface().(jsonapi.Linkable).JSONAPILinks()
		if l == nil {
			return nil, errDecline
		}
		for _, v := range *l {
			switch v.(type) {
			case string, jsonapi.Link:
			default:
				return nil, errDecline // jsonapi refuses these links
			}
		}
		js, err := json.Marshal(l)
		if err != nil {
			return nil, errDecline
		}
		b = append(b, `,"links":`...)
		b = append(b, js...)
	}
	return append(b, '}'), nil
}

// appendShallow writes a related model as a relationship's data: its type
// and ID, or its attributes when it has no ID (jsonapi's shallow node).
func appendShallow(b []byte, p *modelPlan, sv reflect.Value) ([]byte, error) {
	b, hasID := appendTypeID(b, p, sv)
	if !hasID {
		var err error
		if b, err = appendAttrs(b, p, sv); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendTypeID opens a node with its type and, unless empty (omitempty),
// its ID; it says whether there was one.
func appendTypeID(b []byte, p *modelPlan, sv reflect.Value) ([]byte, bool) {
	b = append(b, `{"type":`...)
	b = append(b, p.typ...)
	id := sv.Field(p.id).String()
	if id == "" {
		return b, false
	}
	b = append(b, `,"id":`...)
	return appendString(b, id), true
}

// appendAttrs writes `,"attributes":{…}`, or nothing when no attribute is
// written.
func appendAttrs(b []byte, p *modelPlan, sv reflect.Value) ([]byte, error) {
	start := len(b)
	b = append(b, `,"attributes":{`...)
	mark := len(b)
	var err error
	for i := range p.attrs {
		a := &p.attrs[i]
		if b, err = appendAttr(b, a, sv.Field(a.index), len(b) > mark); err != nil {
			return nil, err
		}
	}
	if len(b) == mark {
		return b[:start], nil
	}
	return append(b, '}'), nil
}

// appendAttr writes one attribute (with a comma before it when more) or
// nothing when jsonapi leaves it out.
func appendAttr(b []byte, a *attrPlan, fv reflect.Value, more bool) ([]byte, error) {
	head := func() []byte {
		if more {
			b = append(b, ',')
		}
		return append(b, a.key...)
	}
	switch a.kind {
	case attrNullable:
		if fv.IsNil() {
			return b, nil // unspecified
		}
		if fv.MapIndex(reflect.ValueOf(false)).IsValid() {
			return append(head(), "null"...), nil
		}
		v := fv.MapIndex(reflect.ValueOf(true))
		if !v.IsValid() {
			return nil, errDecline
		}
		return appendAttr(b, a.inner, v, more)
	case attrTime:
		var t *time.Time
		if fv.CanAddr() {
			t = fv.Addr().Interface().(*time.Time) // no copy to the heap
		} else {
			v := fv.Interface().(time.Time)
			t = &v
		}
		if t.IsZero() {
			return b, nil
		}
		return appendTimeAs(head(), *t, a.format), nil
	case attrTimePtr:
		if fv.IsNil() {
			if a.omitEmpty {
				return b, nil
			}
			return append(head(), "null"...), nil
		}
		t := fv.Interface().(*time.Time)
		if t.IsZero() && a.omitEmpty {
			return b, nil
		}
		return appendTimeAs(head(), *t, a.format), nil
	case attrString:
		s := fv.String()
		if a.omitEmpty && s == "" {
			return b, nil
		}
		return appendString(head(), s), nil
	case attrBool:
		v := fv.Bool()
		if a.omitEmpty && !v {
			return b, nil
		}
		return strconv.AppendBool(head(), v), nil
	case attrInt:
		v := fv.Int()
		if a.omitEmpty && v == 0 {
			return b, nil
		}
		return strconv.AppendInt(head(), v, 10), nil
	case attrUint:
		v := fv.Uint()
		if a.omitEmpty && v == 0 {
			return b, nil
		}
		return strconv.AppendUint(head(), v, 10), nil
	case attrStrings:
		if fv.IsNil() {
			if a.omitEmpty {
				return b, nil
			}
			return append(head(), "null"...), nil
		}
		b = append(head(), '[')
		for i := range fv.Len() {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, fv.Index(i).String())
		}
		return append(b, ']'), nil
	case attrStringMap:
		if fv.IsNil() {
			if a.omitEmpty {
				return b, nil
			}
			return append(head(), "null"...), nil
		}
		type kv struct{ k, v string }
		var kvs []kv
		for it := fv.MapRange(); it.Next(); {
			kvs = append(kvs, kv{it.Key().String(), it.Value().String()})
		}
		slices.SortFunc(kvs, func(x, y kv) int { return strings.Compare(x.k, y.k) })
		b = append(head(), '{')
		for i, e := range kvs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendString(b, e.k), ':')
			b = appendString(b, e.v)
		}
		return append(b, '}'), nil
	}
	v := fv.Interface()
	if a.omitEmpty && reflect.DeepEqual(v, a.zero) {
		return b, nil
	}
	js, err := json.Marshal(v)
	if err != nil {
		return nil, errDecline
	}
	return append(head(), js...), nil
}

// appendTimeAs writes t as jsonapi writes a time attribute: a UTC string
// (iso8601, rfc3339) or Unix seconds.
func appendTimeAs(b []byte, t time.Time, f timeFormat) []byte {
	switch f {
	case timeISO8601:
		b = append(b, '"')
		b = t.UTC().AppendFormat(b, "2006-01-02T15:04:05Z")
		return append(b, '"')
	case timeRFC3339:
		b = append(b, '"')
		b = t.UTC().AppendFormat(b, time.RFC3339)
		return append(b, '"')
	}
	return strconv.AppendInt(b, t.Unix(), 10)
}

// appendString writes s as a JSON string exactly as encoding/json does
// (with its HTML escaping): printable ASCII that needs no escape is
// copied, anything else is left to encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			js, _ := json.Marshal(s)
			return append(b, js...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendIncluded writes `,"included":[…]` for the included models as
// nodes() gathers them (slices flattened, nils skipped, the first of each
// type and ID kept), or nothing when there are none.
func appendIncluded(b []byte, included []any) ([]byte, error) {
	if len(included) == 0 {
		return b, nil
	}
	start := len(b)
	b = append(b, `,"included":[`...)
	mark := len(b)
	var seen map[string]bool
	add := func(v any) error {
		if v == nil || (reflect.ValueOf(v).Kind() == reflect.Pointer && reflect.ValueOf(v).IsNil()) {
			return nil
		}
		p, sv, ok := model(v)
		if !ok {
			return errDecline
		}
		k := string(p.typ) + "/" + sv.Field(p.id).String()
		if seen[k] {
			return nil
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[k] = true
		if len(b) > mark {
			b = append(b, ',')
		}
		var err error
		b, err = appendNode(b, p, sv)
		return err
	}
	for _, v := range included {
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice {
			for i := range rv.Len() {
				if err := add(rv.Index(i).Interface()); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := add(v); err != nil {
			return nil, err
		}
	}
	if len(b) == mark {
		return b[:start], nil
	}
	return append(b, ']'), nil
}

// appendOne writes Respond's document for v and included, with the
// newline json.Encoder ends it with.
func appendOne(b []byte, v any, included []any) ([]byte, error) {
	p, sv, ok := model(v)
	if !ok {
		return nil, errDecline
	}
	b = append(b, `{"data":`...)
	b, err := appendNode(b, p, sv)
	if err != nil {
		return nil, err
	}
	if b, err = appendIncluded(b, included); err != nil {
		return nil, err
	}
	return append(b, "}\n"...), nil
}

// appendMany writes RespondList's document: items (a slice of pointers to
// models), included, and meta.
func appendMany(b []byte, items any, included []any, meta map[string]any) ([]byte, error) {
	rv := reflect.ValueOf(items)
	if rv.Kind() != reflect.Slice {
		return nil, errDecline
	}
	b = append(b, `{"data":[`...)
	for i := range rv.Len() {
		p, sv, ok := model(rv.Index(i).Interface())
		if !ok {
			return nil, errDecline
		}
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendNode(b, p, sv); err != nil {
			return nil, err
		}
	}
	b = append(b, ']')
	b, err := appendIncluded(b, included)
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(meta)
	if err != nil {
		return nil, errDecline
	}
	b = append(b, `,"meta":`...)
	b = append(b, js...)
	return append(b, "}\n"...), nil
}

// docBuffers hold encoded documents between responses (Write has copied
// them when it returns).
var docBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// CheckEncoding writes Respond's document for v and included both ways
// and says how they differ, or that the encoder declined v: a test's way
// to hold its models to hashicorp/jsonapi's bytes.
func CheckEncoding(v any, included ...any) error {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() && rv.Elem().Kind() == reflect.Struct {
		if why := planOf(rv.Elem().Type()).decline; why != "" {
			return fmt.Errorf("the encoder declines %T: %s", v, why)
		}
	}
	got, err := appendOne(nil, v, included)
	if err != nil {
		return fmt.Errorf("the encoder declines %T (a value jsonapi refuses, or not a pointer to a model)", v)
	}
	want, err := genericOne(v, included)
	if err != nil {
		return fmt.Errorf("hashicorp/jsonapi refuses %T (%v), the encoder wrote %s", v, err, got)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("the encoder differs from hashicorp/jsonapi for %T:\n got %s\nwant %s", v, got, want)
	}
	return nil
}
