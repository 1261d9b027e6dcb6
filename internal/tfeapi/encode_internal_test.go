package tfeapi

import (
	"bytes"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/jsonapi"
)

// The models below have every shape the encoder plans, and some it
// declines.

type encKind string

type encText struct{ v string }

func (t encText) MarshalText() ([]byte, error) { return []byte("text:" + t.v), nil }

type encJSON int

func (j encJSON) MarshalJSON() ([]byte, error) {
	return []byte(`{"n": ` + strings.Repeat("1", int(uint(j)%5)+1) + `, "html": "<&>"}`), nil
}

type encNested struct {
	A string `json:"a"`
	B []int  `json:"b,omitempty"`
}

type encRef struct {
	ID   string `jsonapi:"primary,refs"`
	Name string `jsonapi:"attr,name,omitempty"`
}

type encUser struct {
	ID string `jsonapi:"primary,users"`
}

type encTeam struct {
	ID string `jsonapi:"primary,teams"`
}

type encChoice struct {
	User *encUser
	Team *encTeam
}

type encModel struct {
	ID        string                          `jsonapi:"primary,things"`
	Name      string                          `jsonapi:"attr,name"`
	Kind      encKind                         `jsonapi:"attr,kind,omitempty"`
	Flag      bool                            `jsonapi:"attr,flag"`
	OmitFlag  bool                            `jsonapi:"attr,omit-flag,omitempty"`
	Count     int                             `jsonapi:"attr,count"`
	Small     int8                            `jsonapi:"attr,small,omitempty"`
	Big       uint64                          `jsonapi:"attr,big"`
	Ratio     float64                         `jsonapi:"attr,ratio"`
	OmitRatio float64                         `jsonapi:"attr,omit-ratio,omitempty"`
	Created   time.Time                       `jsonapi:"attr,created-at,iso8601"`
	Updated   time.Time                       `jsonapi:"attr,updated-at,rfc3339"`
	Unix      time.Time                       `jsonapi:"attr,unix"`
	When      *time.Time                      `jsonapi:"attr,when,iso8601"`
	OmitWhen  *time.Time                      `jsonapi:"attr,omit-when,iso8601,omitempty"`
	UnixPtr   *time.Time                      `jsonapi:"attr,unix-ptr,omitempty"`
	Tags      []string                        `jsonapi:"attr,tags"`
	OmitTags  []string                        `jsonapi:"attr,omit-tags,omitempty"`
	Labels    map[string]string               `jsonapi:"attr,labels,omitempty"`
	Nested    encNested                       `jsonapi:"attr,nested"`
	NestedPtr *encNested                      `jsonapi:"attr,nested-ptr,omitempty"`
	Items     []encNested                     `jsonapi:"attr,items"`
	Any       any                             `jsonapi:"attr,any,omitempty"`
	Text      encText                         `jsonapi:"attr,text"`
	Custom    encJSON                         `jsonapi:"attr,custom,omitempty"`
	StrPtr    *string                         `jsonapi:"attr,str-ptr"`
	NullStr   jsonapi.NullableAttr[string]    `jsonapi:"attr,null-str,omitempty"`
	NullTime  jsonapi.NullableAttr[time.Time] `jsonapi:"attr,null-time,iso8601"`
	Ignored   string
	Owner     *encRef    `jsonapi:"relation,owner"`
	Parent    *encRef    `jsonapi:"relation,parent,omitempty"`
	Refs      []*encRef  `jsonapi:"relation,refs"`
	OmitRefs  []*encRef  `jsonapi:"relation,omit-refs,omitempty"`
	LockedBy  *encChoice `jsonapi:"polyrelation,locked-by"`
	Holder    *encChoice `jsonapi:"polyrelation,holder,omitempty"`
	links     *jsonapi.Links
}

func (m *encModel) JSONAPILinks() *jsonapi.Links { return m.links }

// encNestedAPI has an attribute that is itself a jsonapi struct: left to
// hashicorp/jsonapi.
type encNestedAPI struct {
	ID    string  `jsonapi:"primary,nesters"`
	Inner *encRef `jsonapi:"attr,inner"`
}

// encMeta has meta: left to hashicorp/jsonapi.
type encMeta struct {
	ID string `jsonapi:"primary,metas"`
}

func (m *encMeta) JSONAPIMeta() *jsonapi.Meta { return &jsonapi.Meta{"x": 1} }

// generic writes what Respond wrote before encode.go.
func generic(t *testing.T, v any, included ...any) []byte {
	t.Helper()
	b, err := genericOne(v, included)
	if err != nil {
		t.Fatalf("hashicorp/jsonapi: %v", err)
	}
	return b
}

func sameAsGeneric(t *testing.T, v any, included ...any) {
	t.Helper()
	want := generic(t, v, included...)
	got, err := appendOne(nil, v, included)
	if err != nil {
		t.Fatalf("the encoder declined %T: %v", v, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the encoder differs from hashicorp/jsonapi:\n got %s\nwant %s", got, want)
	}
}

func full() *encModel {
	at := time.Date(2026, 11, 27, 13, 4, 5, 123456789, time.FixedZone("x", 3600))
	s := "p<&>"
	return &encModel{
		ID: "thing-1", Name: `a "quoted" <b>&amp; ünïcödé` + "\u2028\x01\t\xff", Kind: "k", Flag: true, OmitFlag: true,
		Count: -7, Small: 3, Big: 1 << 63, Ratio: 1e-7, OmitRatio: 2.5, Created: at, Updated: at.Add(time.Hour), Unix: at,
		When: &at, OmitWhen: &at, UnixPtr: &at, Tags: []string{"a", "<b>"}, OmitTags: []string{""},
		Labels: map[string]string{"z": "1", "a": "2", "<": "&"}, Nested: encNested{A: "n", B: []int{1}}, NestedPtr: &encNested{},
		Items: []encNested{{A: "i"}}, Any: map[string]any{"k": []any{1.5, "x", nil}}, Text: encText{"t"}, Custom: 3, StrPtr: &s,
		NullStr: jsonapi.NewNullableAttrWithValue("v"), NullTime: jsonapi.NewNullableAttrWithValue(at),
		Owner: &encRef{ID: "ref-1", Name: "owner"}, Parent: &encRef{Name: "no id: attributes"}, Refs: []*encRef{{ID: "ref-2"}, {ID: "ref-3"}},
		OmitRefs: []*encRef{{ID: "ref-4"}}, LockedBy: &encChoice{Team: &encTeam{ID: "team-1"}}, Holder: &encChoice{User: &encUser{ID: "user-1"}},
		links: &jsonapi.Links{"self": "/api/v2/things/thing-1", "related": jsonapi.Link{Href: "/r?a=<b>", Meta: jsonapi.Meta{"n": 1}}},
	}
}

// TestEncoderMatchesJSONAPI holds the encoder to hashicorp/jsonapi's bytes
// (then encoding/json's) for models with every field set, none, and the
// edges of the wire form: escaped and invalid strings, zero and nil
// times, null and unset nullable attributes, related models without IDs,
// polyrelations, links, included objects.
func TestEncoderMatchesJSONAPI(t *testing.T) {
	zero := time.Time{}
	cases := map[string]func() (any, []any){
		"every field set": func() (any, []any) { return full(), nil },
		"nothing set":     func() (any, []any) { return &encModel{links: &jsonapi.Links{}}, nil },
		"empty lists, zero times, nulls": func() (any, []any) {
			m := &encModel{ID: "t", Tags: []string{}, OmitTags: []string{}, Refs: []*encRef{}, OmitRefs: []*encRef{},
				When: &zero, OmitWhen: &zero, UnixPtr: &zero, NullStr: jsonapi.NewNullNullableAttr[string](),
				NullTime: jsonapi.NewNullNullableAttr[time.Time](), Labels: map[string]string{}, Any: []int(nil),
				links: &jsonapi.Links{"self": ""}}
			return m, nil
		},
		"empty nullable values": func() (any, []any) {
			m := &encModel{ID: "t", NullStr: jsonapi.NewNullableAttrWithValue(""), NullTime: jsonapi.NewNullableAttrWithValue(time.Time{}), links: &jsonapi.Links{}}
			return m, nil
		},
		"included, with duplicates and nils": func() (any, []any) {
			m := full()
			return m, []any{&encRef{ID: "ref-1", Name: "one"}, []*encRef{{ID: "ref-2"}, {ID: "ref-1", Name: "again"}, nil}, (*encRef)(nil), nil, full()}
		},
		"only nils included": func() (any, []any) { return full(), []any{nil, []*encRef{}} },
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			v, inc := c()
			sameAsGeneric(t, v, inc...)
		})
	}
}

// TestEncoderRandomModels compares the two over random values of every
// field of encModel.
func TestEncoderRandomModels(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		m := &encModel{}
		randomize(rng, reflect.ValueOf(m).Elem(), 0)
		if rng.IntN(4) > 0 {
			m.links = &jsonapi.Links{"self": randString(rng)}
		} else {
			m.links = &jsonapi.Links{}
		}
		if m.LockedBy != nil && m.LockedBy.User == nil && m.LockedBy.Team == nil {
			m.LockedBy.User = &encUser{ID: "u"}
		}
		if m.Holder != nil && m.Holder.User == nil && m.Holder.Team == nil {
			m.Holder = nil
		}
		want := generic(t, m)
		got, err := appendOne(nil, m, nil)
		if err != nil {
			t.Fatalf("model %d: declined: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("model %d differs:\n got %s\nwant %s", i, got, want)
		}
	}
}

func randString(rng *rand.Rand) string {
	const alphabet = "ab<>&\"\\\x00\x1f é\u2028\xff-"
	n := rng.IntN(6)
	var b strings.Builder
	for range n {
		b.WriteByte(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

// randomize fills v with random values, zero about a third of the time.
func randomize(rng *rand.Rand, v reflect.Value, depth int) {
	if !v.CanSet() || rng.IntN(3) == 0 || depth > 4 {
		return
	}
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Unix(rng.Int64N(4e9)-1e9, rng.Int64N(1e9)).In(time.FixedZone("r", rng.IntN(20)*1800))))
		return
	case reflect.TypeFor[jsonapi.NullableAttr[string]]():
		switch rng.IntN(3) {
		case 0:
			v.Set(reflect.ValueOf(jsonapi.NewNullNullableAttr[string]()))
		default:
			v.Set(reflect.ValueOf(jsonapi.NewNullableAttrWithValue(randString(rng))))
		}
		return
	case reflect.TypeFor[jsonapi.NullableAttr[time.Time]]():
		switch rng.IntN(3) {
		case 0:
			v.Set(reflect.ValueOf(jsonapi.NewNullNullableAttr[time.Time]()))
		case 1:
			v.Set(reflect.ValueOf(jsonapi.NewNullableAttrWithValue(time.Time{})))
		default:
			v.Set(reflect.ValueOf(jsonapi.NewNullableAttrWithValue(time.Unix(rng.Int64N(4e9), 0))))
		}
		return
	case reflect.TypeFor[any]():
		v.Set(reflect.ValueOf([]any{randString(rng), rng.Float64(), rng.IntN(2) == 0}))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(randString(rng))
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(rng.IntN(255)) - 128)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(rng.Uint64() >> rng.IntN(64))
	case reflect.Float32, reflect.Float64:
		v.SetFloat([]float64{0, 1e-9, 1e21, 123.456, -0.5}[rng.IntN(5)])
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		randomize(rng, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		n := rng.IntN(3)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			e := s.Index(i)
			if e.Kind() == reflect.Pointer {
				e.Set(reflect.New(e.Type().Elem()))
				randomize(rng, e.Elem(), depth+1)
				continue
			}
			randomize(rng, e, depth+1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range rng.IntN(3) {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			randomize(rng, k, depth+1)
			randomize(rng, e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			randomize(rng, v.Field(i), depth+1)
		}
	}
}

// TestEncoderDeclines: shapes it does not plan, and values jsonapi
// refuses, go the generic way, with its bytes or its error.
func TestEncoderDeclines(t *testing.T) {
	for name, v := range map[string]any{
		"nested jsonapi attribute": &encNestedAPI{ID: "n", Inner: &encRef{ID: "r"}},
		"meta":                     &encMeta{ID: "m"},
		"not a pointer":            encRef{ID: "r"},
		"nil in a to-many":         &encModel{ID: "t", Refs: []*encRef{nil}, links: &jsonapi.Links{}},
		"invalid links":            &encModel{ID: "t", links: &jsonapi.Links{"self": 1}},
		"a choice with none set":   &encModel{ID: "t", LockedBy: &encChoice{}, links: &jsonapi.Links{}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := appendOne(nil, v, nil); err == nil {
				t.Fatalf("the encoder wrote %T itself", v)
			}
			want, gerr := genericOne(v, nil)
			rec := httptest.NewRecorder()
			Respond(rec, httptest.NewRequest("GET", "/", nil), http.StatusOK, v)
			if gerr != nil {
				if rec.Code < 400 || !strings.Contains(rec.Body.String(), "errors") {
					t.Fatalf("generic refused (%v) but Respond answered %d %s", gerr, rec.Code, rec.Body)
				}
				return
			}
			if rec.Code != http.StatusOK || !bytes.Equal(rec.Body.Bytes(), want) {
				t.Fatalf("Respond answered %d %s, want the generic document %s", rec.Code, rec.Body, want)
			}
		})
	}
}

// TestRespondListMatchesJSONAPI: a page of models with included objects
// and its pagination meta.
func TestRespondListMatchesJSONAPI(t *testing.T) {
	items := []*encModel{full(), {ID: "t2", links: &jsonapi.Links{}}, full()}
	items[2].ID = "t3"
	for _, pg := range []Pagination{{Page: 1, Size: 2, Total: 3}, {Page: 2, Size: 2, Total: 3}, {Page: 1, Size: 20, Total: 0}} {
		for _, list := range [][]*encModel{items, {}, nil} {
			meta := map[string]any{"pagination": pg.meta()}
			want, err := genericMany(list, []any{&encRef{ID: "ref-9"}}, meta)
			if err != nil {
				t.Fatal(err)
			}
			got, err := appendMany(nil, list, []any{&encRef{ID: "ref-9"}}, meta)
			if err != nil {
				t.Fatalf("declined: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("the list differs:\n got %s\nwant %s", got, want)
			}
		}
	}
}

// TestEncoderCheckPanicsOnADifference: with the check on, a document the
// encoder writes differently panics (here, a generic writer that
// disagrees), saying where they part but not what they hold (a document
// may carry a token just created).
func TestEncoderCheckPanicsOnADifference(t *testing.T) {
	old := checkEncoder
	checkEncoder = true
	defer func() { checkEncoder = old }()
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "differs from hashicorp/jsonapi") {
			t.Fatalf("recovered %v, want the check's panic", r)
		}
		if msg := r.(string); strings.Contains(msg, "secret-value") || !strings.Contains(msg, "part at byte 23") {
			t.Fatalf("the check's panic %q shows the document or not where it differs", msg)
		}
	}()
	respond(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil), 200,
		func(b []byte) ([]byte, error) { return append(b, `{"token":"secret-value"}`+"\n"...), nil },
		func() ([]byte, error) { return []byte(`{"token":"secret-value" }` + "\n"), nil })
}

func BenchmarkRespond(b *testing.B) {
	m := full()
	b.Run("encoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf := docBuffers.Get().(*[]byte)
			out, _ := appendOne((*buf)[:0], m, nil)
			*buf = out[:0]
			docBuffers.Put(buf)
		}
	})
	b.Run("hashicorp-jsonapi", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = genericOne(m, nil)
		}
	})
}
