// Package state keeps workspaces' Terraform state: state versions (the
// history), their outputs, and which version is current.
//
// A version is created pending (its content arrives later through a
// capability URL) or finalized at once (legacy inline state). Content is
// checked before anything is stored: size, MD5, that it parses as a state
// file, and that it does not roll the workspace back (lower serial, or the
// same serial with other content) or replace it with a foreign lineage,
// unless force is set. A version becomes current only in the transaction
// that finalizes it, after its blob is stored; a pending version is never
// current.
package state

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// Status is a state version's lifecycle status.
type Status string

// Statuses.
const (
	StatusPending   Status = "pending"
	StatusFinalized Status = "finalized"
	// StatusDiscarded marks a pending version overtaken by a newer finalized
	// one (or discarded when its workspace was force-unlocked); its upload
	// URL no longer works.
	StatusDiscarded Status = "discarded"
	// StatusBackingDataDeleted marks a finalized version whose content
	// (state and JSON state) a data retention policy deleted
	// (internal/retention); it keeps its outputs and everything else.
	StatusBackingDataDeleted Status = "backing_data_permanently_deleted"
	// StatusBackingDataSoftDeleted marks a finalized version whose content
	// a workspace admin set aside (Terraform Enterprise's soft delete): it
	// cannot be downloaded until restored, or deleted for good.
	StatusBackingDataSoftDeleted Status = "backing_data_soft_deleted"
)

// DefaultMaxSize bounds a state file and a JSON state document.
const DefaultMaxSize = 100 << 20

// Version is a state version.
type Version struct {
	ID          string
	WorkspaceID string
	Status      Status
	// Serial and Lineage are the values given when the version was created
	// (Lineage falls back to the content's when none was given).
	Serial  int64
	Lineage string
	// MD5 is the hex MD5 the creator claimed ("" when none was given).
	MD5         string
	Force       bool
	RunID       string
	CreatedBy   string
	CreatedAt   time.Time
	FinalizedAt *time.Time

	// Filled when the content is stored.
	StateKey         string
	JSONStateKey     string
	Size             int64
	StateMD5         string
	StateSerial      int64
	StateLineage     string
	FormatVersion    int
	TerraformVersion string
	Summary          Summary

	jsonOutputs []byte // json-state-outputs given at creation, for output types
}

// clone returns a copy of v that shares nothing a caller could change.
func (v *Version) clone() *Version {
	c := *v
	if v.FinalizedAt != nil {
		t := *v.FinalizedAt
		c.FinalizedAt = &t
	}
	c.jsonOutputs = slices.Clone(v.jsonOutputs)
	c.Summary.Resources = slices.Clone(v.Summary.Resources)
	c.Summary.Modules = cloneCounts(v.Summary.Modules)
	c.Summary.Providers = cloneCounts(v.Summary.Providers)
	return &c
}

func cloneCounts(m map[string]map[string]int) map[string]map[string]int {
	if m == nil {
		return nil
	}
	out := make(map[string]map[string]int, len(m))
	for k, v := range m {
		out[k] = maps.Clone(v)
	}
	return out
}

// Summary describes a state's resources.
type Summary struct {
	Resources []ResourceSummary `json:"resources"`
	// Modules maps a module address ("root" for the root module) to resource
	// types and counts; Providers maps a provider address likewise.
	Modules   map[string]map[string]int `json:"modules"`
	Providers map[string]map[string]int `json:"providers"`
	// ResourceCount is the number of managed resource instances.
	ResourceCount int `json:"resource-count"`
	// BillableRUM counts managed resource instances other than
	// null_resource and terraform_data.
	BillableRUM int `json:"billable-rum"`
}

// ResourceSummary is one resource of a state.
type ResourceSummary struct {
	Name     string `json:"name"`
	Count    int    `json:"count"`
	Type     string `json:"type"`
	Module   string `json:"module"`
	Provider string `json:"provider"`
	Mode     string `json:"mode"`
}

// Output is one root-module output of a finalized state version.
type Output struct {
	ID             string
	StateVersionID string
	Name           string
	Sensitive      bool
	// Type is the coarse type HCP Terraform reports: string, number,
	// boolean, array or hash.
	Type string
	// DetailedType is the output's type in Terraform's JSON type syntax.
	DetailedType json.RawMessage
	Value        json.RawMessage
}

// parsed is what validation learns from a state file.
type parsed struct {
	md5              string
	size             int64
	serial           int64
	lineage          string
	formatVersion    int
	terraformVersion string
	summary          Summary
	outputs          []*Output
}

type rawState struct {
	Version          *int                 `json:"version"`
	TerraformVersion string               `json:"terraform_version"`
	Serial           *int64               `json:"serial"`
	Lineage          string               `json:"lineage"`
	Outputs          map[string]rawOutput `json:"outputs"`
	Resources        []rawResource        `json:"resources"`
}

type rawOutput struct {
	Value     json.RawMessage `json:"value"`
	Type      json.RawMessage `json:"type"`
	Sensitive bool            `json:"sensitive"`
}

type rawResource struct {
	Module    string     `json:"module"`
	Mode      string     `json:"mode"`
	Type      string     `json:"type"`
	Name      string     `json:"name"`
	Provider  string     `json:"provider"`
	Instances []struct{} `json:"instances"` // only counted
}

var md5RE = core.NewPattern(`^[0-9a-f]+$`, 32, 32)

// parseState validates a raw state file and extracts what Terrace keeps
// about it. jsonOutputs (the json-state-outputs attribute, may be nil)
// supplies output types a state file lacks.
func parseState(data []byte, maxSize int64, jsonOutputs []byte) (*parsed, error) {
	if int64(len(data)) > maxSize {
		return nil, tooLarge("state", maxSize)
	}
	sum := md5.Sum(data)
	p := &parsed{md5: hex.EncodeToString(sum[:]), size: int64(len(data))}
	var raw rawState
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return nil, core.Invalid("state is not a valid Terraform state file: %v", err)
	}
	if dec.More() {
		return nil, core.Invalid("state is not a valid Terraform state file: data after the JSON object")
	}
	if raw.Version == nil || *raw.Version < 1 {
		return nil, core.Invalid("state is not a valid Terraform state file: it has no \"version\"")
	}
	if raw.Serial == nil || *raw.Serial < 0 {
		return nil, core.Invalid("state is not a valid Terraform state file: it has no \"serial\"")
	}
	p.serial, p.lineage, p.formatVersion, p.terraformVersion = *raw.Serial, raw.Lineage, *raw.Version, raw.TerraformVersion

	var fallback map[string]rawOutput
	if len(jsonOutputs) > 0 {
		_ = json.Unmarshal(jsonOutputs, &fallback) // validated when given
	}
	names := make([]string, 0, len(raw.Outputs))
	for name := range raw.Outputs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		o := raw.Outputs[name]
		value := o.Value
		if len(value) == 0 {
			value = json.RawMessage("null")
		}
		dt := o.Type
		if len(dt) == 0 || string(dt) == "null" {
			if f, ok := fallback[name]; ok && len(f.Type) > 0 && string(f.Type) != "null" {
				dt = f.Type
			} else {
				dt = inferType(value)
			}
		}
		p.outputs = append(p.outputs, &Output{Name: name, Sensitive: o.Sensitive, Type: coarseType(dt, value), DetailedType: compact(dt), Value: compact(value)})
	}

	s := &p.summary
	s.Modules, s.Providers = map[string]map[string]int{}, map[string]map[string]int{}
	for _, r := range raw.Resources {
		module := r.Module
		if module == "" {
			module = "root"
		}
		n := len(r.Instances)
		key := r.Type
		if r.Mode == "data" {
			key = "data." + r.Type
		}
		s.Resources = append(s.Resources, ResourceSummary{Name: r.Name, Count: n, Type: key, Module: module, Provider: r.Provider, Mode: r.Mode})
		if s.Modules[module] == nil {
			s.Modules[module] = map[string]int{}
		}
		s.Modules[module][key] += n
		if r.Provider != "" {
			if s.Providers[r.Provider] == nil {
				s.Providers[r.Provider] = map[string]int{}
			}
			s.Providers[r.Provider][key] += n
		}
		if r.Mode == "managed" {
			s.ResourceCount += n
			if r.Type != "null_resource" && r.Type != "terraform_data" {
				s.BillableRUM += n
			}
		}
	}
	return p, nil
}

// validateJSONState checks a JSON state document (terraform show -json).
func validateJSONState(data []byte, maxSize int64) error {
	if int64(len(data)) > maxSize {
		return tooLarge("JSON state", maxSize)
	}
	var v map[string]json.RawMessage
	if err := json.Unmarshal(data, &v); err != nil {
		return core.Invalid("JSON state is not a JSON object: %v", err)
	}
	return nil
}

func tooLarge(what string, limit int64) error {
	return &core.Error{Kind: core.KindTooLarge, Detail: fmt.Sprintf("%s is larger than the limit of %d bytes", what, limit)}
}

func compact(b json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

// coarseType maps a Terraform type to the type names HCP Terraform shows.
func coarseType(dt, value json.RawMessage) string {
	var s string
	if json.Unmarshal(dt, &s) == nil {
		switch s {
		case "string", "number":
			return s
		case "bool":
			return "boolean"
		}
		return valueKind(value)
	}
	var arr []json.RawMessage
	if json.Unmarshal(dt, &arr) == nil && len(arr) > 0 {
		var kind string
		_ = json.Unmarshal(arr[0], &kind)
		switch kind {
		case "list", "set", "tuple":
			return "array"
		case "map", "object":
			return "hash"
		}
	}
	return valueKind(value)
}

func valueKind(v json.RawMessage) string {
	t := strings.TrimSpace(string(v))
	switch {
	case t == "" || t == "null":
		return "string"
	case t[0] == '"':
		return "string"
	case t[0] == '[':
		return "array"
	case t[0] == '{':
		return "hash"
	case t == "true" || t == "false":
		return "boolean"
	}
	return "number"
}

// inferType derives a Terraform JSON type from a value, for outputs whose
// state entry lacks one (states written before Terraform 0.12).
func inferType(v json.RawMessage) json.RawMessage {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return json.RawMessage(`"dynamic"`)
	}
	b, _ := json.Marshal(typeOf(x))
	return b
}

func typeOf(x any) any {
	switch t := x.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		elems := make([]any, len(t))
		for i, e := range t {
			elems[i] = typeOf(e)
		}
		return []any{"tuple", elems}
	case map[string]any:
		attrs := map[string]any{}
		for k, e := range t {
			attrs[k] = typeOf(e)
		}
		return []any{"object", attrs}
	}
	return "dynamic"
}

// Resource is one managed resource instance of a workspace's current state
// (the workspace resources API).
type Resource struct {
	ID string
	// Address is HCP Terraform's form: module names without "module."
	// prefixes, then type.name and the instance key, e.g. "net.aws_vpc.main[0]".
	Address  string
	Name     string
	Module   string // "root" for the root module
	Provider string // e.g. "hashicorp/aws"
	Type     string
	// NameIndex is the instance key ("" when the resource has none).
	NameIndex string
	HasIndex  bool
}

type rawInstances struct {
	Resources []struct {
		Module    string `json:"module"`
		Mode      string `json:"mode"`
		Type      string `json:"type"`
		Name      string `json:"name"`
		Provider  string `json:"provider"`
		Instances []struct {
			IndexKey json.RawMessage `json:"index_key"`
		} `json:"instances"`
	} `json:"resources"`
}

// parseResources lists the managed resource instances of a state file.
func parseResources(workspaceID string, data []byte) ([]*Resource, error) {
	var raw rawInstances
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("parsing stored state: %w", err)
	}
	var out []*Resource
	for _, r := range raw.Resources {
		if r.Mode != "managed" {
			continue
		}
		module := strings.ReplaceAll(strings.TrimPrefix(r.Module, "module."), ".module.", ".")
		prefix := ""
		if module == "" {
			module = "root"
		} else {
			prefix = module + "."
		}
		provider := r.Provider
		if i := strings.Index(provider, `["`); i >= 0 {
			provider = strings.TrimSuffix(provider[i+2:], `"]`)
		}
		provider = strings.TrimPrefix(provider, "registry.terraform.io/")
		for _, in := range r.Instances {
			res := &Resource{Name: r.Name, Module: module, Provider: provider, Type: r.Type}
			res.Address = prefix + r.Type + "." + r.Name
			if len(in.IndexKey) > 0 && string(in.IndexKey) != "null" {
				res.HasIndex = true
				var s string
				if json.Unmarshal(in.IndexKey, &s) == nil {
					res.NameIndex = s
					res.Address += "[" + string(in.IndexKey) + "]"
				} else {
					res.NameIndex = string(in.IndexKey)
					res.Address += "[" + res.NameIndex + "]"
				}
			}
			sum := md5.Sum([]byte(workspaceID + "\x00" + res.Address))
			res.ID = "wsr-" + hex.EncodeToString(sum[:8])
			out = append(out, res)
		}
	}
	return out, nil
}
