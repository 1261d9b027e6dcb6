// Configuration objects and their validation; every validation error names
// the offending field (FieldError.Field is the JSON path).

package orchestrator

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/terracehq/terrace/internal/core"
)

// DefaultClass is the class of a resource request that names none.
const DefaultClass = "default"

// WorkloadType is the resource type of the node each manifest workload
// becomes. A module for it is optional: without one the workload is a node
// in the graph (its outputs become a root output) but no module block.
const WorkloadType = "workload"

// Limits from the orchestrator's API.
const (
	MaxInlineSource   = 2000 // characters of module_source_code
	MaxModuleSource   = 200  // characters of module_source
	MaxModuleIDLength = 100
	MaxMapEntries     = 20 // module_inputs, provider_mapping, dependencies, coprovisioned, params, provider configuration
	MaxManifestItems  = 100
	MaxDescription    = 200
)

var (
	// objectIDRE is the pattern of projects, environment types,
	// environments, modules and provider ids.
	objectIDRE = regexp.MustCompile(`^[a-z](?:-?[a-z0-9]+)+$`)
	// typeRE is the pattern of resource types and classes.
	typeRE = core.NewPattern(`^[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9]$`, 2, 63)
	// resourceIDRE is the pattern of resource ids (dots allowed, so the
	// default ids workloads.<w>.<alias> and shared.<alias> match).
	resourceIDRE    = regexp.MustCompile(`^[a-z0-9]+(?:-+[a-z0-9]+)*(?:\.[a-z0-9]+(?:-+[a-z0-9]+)*)*$`)
	providerTypeRE  = regexp.MustCompile(`^[a-z][a-z0-9_-]+$`)
	providerSrcRE   = regexp.MustCompile(`^(?:[a-z0-9.-]+/)?[A-Za-z0-9_-]+/[A-Za-z0-9_-]+$`)
	registrySrcRE   = regexp.MustCompile(`^(?:[a-z0-9.-]+\.[a-z]+/)?[A-Za-z0-9_-]+/[A-Za-z0-9_-]+/[A-Za-z0-9_-]+(?://[^@]*)?(?:@[0-9A-Za-z.+-]+)?$`)
	keyRE           = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
	workloadNameRE  = core.NewPattern(`^[a-z](?:[a-z0-9_-]*[a-z0-9])?$`, 1, 63)
	paramTypes      = map[string]bool{"string": true, "number": true, "bool": true, "list": true, "map": true, "any": true}
	contextKeys     = map[string]bool{"org_id": true, "project_id": true, "env_id": true, "env_type_id": true, "res_type": true, "res_class": true, "res_id": true}
	manifestCtxKeys = map[string]bool{"org_id": true, "project_id": true, "env_id": true, "env_type_id": true}
)

// FieldError is one validation failure of one field. Field is the path of
// the field in the object's JSON form, e.g. "dependencies.db.class".
type FieldError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

func (e FieldError) Error() string { return e.Field + ": " + e.Detail }

// ValidationError lists every field error of one object. It unwraps to a
// core KindInvalid error so the HTTP edge answers 422.
type ValidationError struct {
	Errors []FieldError
}

func (v *ValidationError) Error() string {
	msgs := make([]string, len(v.Errors))
	for i, e := range v.Errors {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap makes core.KindOf(err) report KindInvalid.
func (v *ValidationError) Unwrap() error {
	return &core.Error{Kind: core.KindInvalid, Detail: v.Error()}
}

// fieldErrs collects field errors while validating.
type fieldErrs []FieldError

func (f *fieldErrs) add(field, format string, args ...any) {
	*f = append(*f, FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
}

func (f fieldErrs) err() error {
	if len(f) == 0 {
		return nil
	}
	return &ValidationError{Errors: f}
}

// FieldErrors returns the field errors inside err (nil when it carries none).
func FieldErrors(err error) []FieldError {
	var v *ValidationError
	if errors.As(err, &v) {
		return v.Errors
	}
	return nil
}

// idRule is an ID's pattern: a regexp.Regexp or a core.Pattern.
type idRule interface {
	MatchString(string) bool
	String() string
}

func (f *fieldErrs) id(field, v string, re idRule, required bool) {
	switch {
	case v == "" && required:
		f.add(field, "is required")
	case v != "" && !re.MatchString(v):
		f.add(field, "%q does not match %s", v, re)
	}
}

func (f *fieldErrs) displayName(field, v string) {
	if v != "" && (utf8.RuneCountInString(v) < 2 || utf8.RuneCountInString(v) > 60) {
		f.add(field, "must be 2 to 60 characters long")
	}
}

// Project groups environments.
type Project struct {
	ID          string `json:"id"`
	DisplayName string `json:"display_name,omitempty"`
}

// Validate checks the project's fields.
func (p *Project) Validate() error {
	var f fieldErrs
	f.id("id", p.ID, objectIDRE, true)
	f.displayName("display_name", p.DisplayName)
	return f.err()
}

// EnvironmentType classifies environments (development, production, …).
type EnvironmentType struct {
	ID          string `json:"id"`
	DisplayName string `json:"display_name,omitempty"`
}

// Validate checks the environment type's fields.
func (e *EnvironmentType) Validate() error {
	var f fieldErrs
	f.id("id", e.ID, objectIDRE, true)
	f.displayName("display_name", e.DisplayName)
	return f.err()
}

// Environment is one deployment target of a project.
type Environment struct {
	ID          string `json:"id"`
	ProjectID   string `json:"project_id"`
	EnvTypeID   string `json:"env_type_id"`
	DisplayName string `json:"display_name,omitempty"`
}

// Validate checks the environment's fields.
func (e *Environment) Validate() error {
	var f fieldErrs
	f.id("id", e.ID, objectIDRE, true)
	f.id("project_id", e.ProjectID, objectIDRE, true)
	f.id("env_type_id", e.EnvTypeID, objectIDRE, true)
	f.displayName("display_name", e.DisplayName)
	return f.err()
}

// ResourceType is the contract of a kind of resource: the outputs its
// modules provide, as a JSON Schema object.
type ResourceType struct {
	ID           string         `json:"id"`
	Description  string         `json:"description,omitempty"`
	OutputSchema map[string]any `json:"output_schema"`
	// IsDeveloperAccessible false keeps the type out of manifests (it may
	// only be a module dependency). Nil means true.
	IsDeveloperAccessible *bool `json:"is_developer_accessible,omitempty"`
}

// DeveloperAccessible reports whether manifests may request the type.
func (r *ResourceType) DeveloperAccessible() bool {
	return r.IsDeveloperAccessible == nil || *r.IsDeveloperAccessible
}

// Validate checks the resource type's fields.
func (r *ResourceType) Validate() error {
	var f fieldErrs
	f.id("id", r.ID, typeRE, true)
	if len(r.Description) > MaxDescription {
		f.add("description", "must be at most %d characters", MaxDescription)
	}
	if r.OutputSchema == nil {
		f.add("output_schema", "is required (a JSON Schema object)")
	} else if t, ok := r.OutputSchema["type"]; ok && t != "object" {
		f.add("output_schema.type", "must be \"object\"")
	}
	return f.err()
}

// outputType is the JSON Schema type of an output path ("" if unknown).
func (r *ResourceType) outputType(path []string) string {
	if r == nil {
		return ""
	}
	schema := r.OutputSchema
	for _, p := range path {
		props, _ := schema["properties"].(map[string]any)
		next, _ := props[p].(map[string]any)
		if next == nil {
			return ""
		}
		schema = next
	}
	t, _ := schema["type"].(string)
	return t
}

// Provider is a provider configuration modules share through their
// provider_mapping, referenced as "<provider_type>.<id>".
type Provider struct {
	ProviderType      string         `json:"provider_type"`
	ID                string         `json:"id"`
	Description       string         `json:"description,omitempty"`
	Source            string         `json:"source"`
	VersionConstraint string         `json:"version_constraint"`
	Configuration     map[string]any `json:"configuration,omitempty"`
}

// Ref is the provider's "<provider_type>.<id>" reference.
func (p *Provider) Ref() string { return p.ProviderType + "." + p.ID }

// Validate checks the provider's fields.
func (p *Provider) Validate() error {
	var f fieldErrs
	f.id("provider_type", p.ProviderType, providerTypeRE, true)
	f.id("id", p.ID, objectIDRE, true)
	f.id("source", p.Source, providerSrcRE, true)
	if p.VersionConstraint == "" {
		f.add("version_constraint", "is required (e.g. \"~> 1.0\")")
	}
	if len(p.Description) > MaxDescription {
		f.add("description", "must be at most %d characters", MaxDescription)
	}
	if len(p.Configuration) > MaxMapEntries {
		f.add("configuration", "must have at most %d keys", MaxMapEntries)
	}
	for _, k := range sortedKeys(p.Configuration) {
		if !keyRE.MatchString(k) {
			f.add("configuration."+k, "is not a valid attribute name")
		}
		f.placeholders("configuration."+k, p.Configuration[k], allowProvider)
	}
	return f.err()
}

// ModuleParam declares a parameter a resource request may pass to a module.
type ModuleParam struct {
	Type        string `json:"type"`
	IsOptional  bool   `json:"is_optional,omitempty"`
	Description string `json:"description,omitempty"`
}

// Request asks for a resource: a module dependency, a manifest resource, or
// (embedded in Coprovisioned) a coprovisioned resource. Class and ID may use
// "@" for the current resource's class and id.
type Request struct {
	Type   string         `json:"type"`
	Class  string         `json:"class,omitempty"`
	ID     string         `json:"id,omitempty"`
	Params map[string]any `json:"params,omitempty"`
}

// Coprovisioned is a resource a module adds to the graph beside itself.
type Coprovisioned struct {
	Request
	// IsDependentOnCurrent adds the edge coprovisioned → current.
	IsDependentOnCurrent bool `json:"is_dependent_on_current,omitempty"`
	// CopyDependentsFromCurrent makes every node that depends on the
	// current node depend on the coprovisioned one too.
	CopyDependentsFromCurrent bool `json:"copy_dependents_from_current,omitempty"`
}

// Module is Terraform code that provisions one resource type, plus the
// resources it needs (dependencies) and brings along (coprovisioned).
type Module struct {
	ID           string `json:"id"`
	VersionID    string `json:"version_id,omitempty"` // set by the store on each update
	ResourceType string `json:"resource_type"`
	Description  string `json:"description,omitempty"`
	// Exactly one of ModuleSource and ModuleSourceCode.
	ModuleSource     string                 `json:"module_source,omitempty"`
	ModuleSourceCode string                 `json:"module_source_code,omitempty"`
	ModuleParams     map[string]ModuleParam `json:"module_params,omitempty"`
	ModuleInputs     map[string]any         `json:"module_inputs,omitempty"`
	ProviderMapping  map[string]string      `json:"provider_mapping,omitempty"`
	Dependencies     map[string]Request     `json:"dependencies,omitempty"`
	Coprovisioned    []Coprovisioned        `json:"coprovisioned,omitempty"`
}

// Validate checks the module's fields on their own; references to other
// objects (resource types, providers) are checked by the caller that has
// them, and again by Compile.
func (m *Module) Validate() error {
	var f fieldErrs
	f.id("id", m.ID, objectIDRE, true)
	if len(m.ID) > MaxModuleIDLength {
		f.add("id", "must be at most %d characters", MaxModuleIDLength)
	}
	f.id("resource_type", m.ResourceType, typeRE, true)
	if len(m.Description) > MaxDescription {
		f.add("description", "must be at most %d characters", MaxDescription)
	}
	switch {
	case m.ModuleSource == "" && m.ModuleSourceCode == "":
		f.add("module_source", "exactly one of module_source and module_source_code is required")
	case m.ModuleSource != "" && m.ModuleSourceCode != "":
		f.add("module_source_code", "must not be set together with module_source (set exactly one)")
	case m.ModuleSource != "":
		if err := checkModuleSource(m.ModuleSource); err != "" {
			f.add("module_source", "%s", err)
		}
	default:
		if n := utf8.RuneCountInString(m.ModuleSourceCode); n > MaxInlineSource {
			f.add("module_source_code", "is %d characters long; inline module source is limited to %d characters", n, MaxInlineSource)
		}
	}
	if len(m.ModuleParams) > MaxMapEntries {
		f.add("module_params", "must have at most %d entries", MaxMapEntries)
	}
	for _, k := range sortedKeys(m.ModuleParams) {
		p := m.ModuleParams[k]
		if !keyRE.MatchString(k) {
			f.add("module_params."+k, "is not a valid variable name")
		}
		if !paramTypes[p.Type] {
			f.add("module_params."+k+".type", "must be one of string, number, bool, list, map, any (got %q)", p.Type)
		}
	}
	if len(m.ModuleInputs) > MaxMapEntries {
		f.add("module_inputs", "must have at most %d entries", MaxMapEntries)
	}
	for _, k := range sortedKeys(m.ModuleInputs) {
		if !keyRE.MatchString(k) {
			f.add("module_inputs."+k, "is not a valid variable name")
		}
		f.placeholders("module_inputs."+k, m.ModuleInputs[k], allowModule.withAliases(m.Dependencies))
	}
	if len(m.ProviderMapping) > MaxMapEntries {
		f.add("provider_mapping", "must have at most %d entries", MaxMapEntries)
	}
	for _, k := range sortedKeys(m.ProviderMapping) {
		if !providerTypeRE.MatchString(k) {
			f.add("provider_mapping."+k, "is not a valid provider local name")
		}
		typ, id, ok := strings.Cut(m.ProviderMapping[k], ".")
		if !ok || !providerTypeRE.MatchString(typ) || !objectIDRE.MatchString(id) {
			f.add("provider_mapping."+k, "must be \"<provider_type>.<provider_id>\" (got %q)", m.ProviderMapping[k])
		}
	}
	if len(m.Dependencies) > MaxMapEntries {
		f.add("dependencies", "must have at most %d entries", MaxMapEntries)
	}
	for _, alias := range sortedKeys(m.Dependencies) {
		field := "dependencies." + alias
		if !keyRE.MatchString(alias) {
			f.add(field, "alias is not a valid name")
		}
		f.request(field, m.Dependencies[alias], true, allowModule.withAliases(m.Dependencies))
	}
	if len(m.Coprovisioned) > MaxMapEntries {
		f.add("coprovisioned", "must have at most %d entries", MaxMapEntries)
	}
	for i, c := range m.Coprovisioned {
		f.request(fmt.Sprintf("coprovisioned[%d]", i), c.Request, true, allowModule.withAliases(m.Dependencies))
	}
	return f.err()
}

// checkModuleSource returns why src is not an accepted module source, or
// "". Git sources are git::https://, git::ssh:// (and git::http:// for a
// server on a private network) with an optional //subdir and ?ref= (a
// branch, tag or commit); bare github.com and bitbucket.org addresses are
// refused with the git:: form to use instead.
func checkModuleSource(src string) string {
	switch {
	case len(src) > MaxModuleSource:
		return fmt.Sprintf("must be at most %d characters", MaxModuleSource)
	case strings.HasPrefix(src, "git::"):
		rest := strings.TrimPrefix(src, "git::")
		scheme, addr, ok := strings.Cut(rest, "://")
		if !ok || (scheme != "https" && scheme != "ssh" && scheme != "http") {
			return fmt.Sprintf("%q: a git source is git::https://…, git::ssh://… or git::http://…", src)
		}
		if addr == "" || strings.ContainsAny(src, " \t\n") {
			return "is not a valid git URL"
		}
		if _, query, ok := strings.Cut(addr, "?"); ok {
			for _, kv := range strings.Split(query, "&") {
				k, v, _ := strings.Cut(kv, "=")
				if k == "ref" && v == "" {
					return "?ref= needs a branch, tag or commit"
				}
			}
		}
		return ""
	case strings.HasPrefix(src, "/"):
		if strings.Contains(src, "..") {
			return "a mounted path must not contain \"..\""
		}
		return ""
	case strings.HasPrefix(src, "github.com/"), strings.HasPrefix(src, "bitbucket.org/"):
		host, _, _ := strings.Cut(src, "/")
		return fmt.Sprintf("%q: %s sources must use the git:: prefix: \"git::https://%s\" (or git::ssh://)", src, host, src)
	case registrySrcRE.MatchString(src):
		return ""
	}
	return fmt.Sprintf("%q is not a git::https:// or git::ssh:// URL, a mounted /path, or a registry source <namespace>/<name>/<provider>[@version]", src)
}

// request checks a dependency, coprovisioned or manifest request. Class and
// id may contain "@" in modules (it stands for the current resource's
// value); they are checked with "@" replaced by a plausible value.
func (f *fieldErrs) request(field string, r Request, inModule bool, allow allowed) {
	f.id(field+".type", r.Type, typeRE, true)
	class, id := r.Class, r.ID
	if inModule {
		class = strings.ReplaceAll(class, "@", "x0")
		id = strings.ReplaceAll(id, "@", "x0")
	}
	f.id(field+".class", class, typeRE, false)
	f.id(field+".id", id, resourceIDRE, false)
	if len(r.Params) > MaxMapEntries {
		f.add(field+".params", "must have at most %d entries", MaxMapEntries)
	}
	for _, k := range sortedKeys(r.Params) {
		f.placeholders(field+".params."+k, r.Params[k], allow)
	}
}

// placeholders checks the syntax and the allowed kinds of every placeholder
// in v (recursively through maps and lists).
func (f *fieldErrs) placeholders(field string, v any, allow allowed) {
	walkStrings(v, field, func(path, s string) {
		t, err := parseTemplate(s)
		if err != nil {
			f.add(path, "%v", err)
			return
		}
		for _, r := range t.refs() {
			if msg := allow.check(r); msg != "" {
				f.add(path, "%s", msg)
			}
		}
	})
}

// ModuleRule selects a module for resources of the module's type. The most
// specific matching rule wins (see selectModule).
type ModuleRule struct {
	ID            string `json:"id,omitempty"` // a uuid assigned by the store
	ModuleID      string `json:"module_id"`
	ResourceClass string `json:"resource_class,omitempty"` // default "default"
	ResourceID    string `json:"resource_id,omitempty"`
	ProjectID     string `json:"project_id,omitempty"`
	EnvTypeID     string `json:"env_type_id,omitempty"`
	EnvID         string `json:"env_id,omitempty"`
}

// Class is the rule's class with the default applied.
func (r *ModuleRule) Class() string {
	if r.ResourceClass == "" {
		return DefaultClass
	}
	return r.ResourceClass
}

// Validate checks the rule's fields.
func (r *ModuleRule) Validate() error {
	var f fieldErrs
	f.id("module_id", r.ModuleID, objectIDRE, true)
	f.id("resource_class", r.ResourceClass, typeRE, false)
	f.id("resource_id", r.ResourceID, resourceIDRE, false)
	f.id("project_id", r.ProjectID, objectIDRE, false)
	f.id("env_type_id", r.EnvTypeID, objectIDRE, false)
	f.id("env_id", r.EnvID, objectIDRE, false)
	if r.EnvTypeID != "" && r.EnvID != "" {
		f.add("env_id", "must not be set together with env_type_id")
	}
	if r.EnvID != "" && r.ProjectID == "" {
		f.add("project_id", "is required when env_id is set")
	}
	return f.err()
}

// Manifest is what a developer deploys: workloads with their resources and
// outputs, and resources shared between workloads.
type Manifest struct {
	Workloads map[string]Workload `json:"workloads,omitempty"`
	Shared    map[string]Request  `json:"shared,omitempty"`
}

// Workload is a logical group of resources with outputs.
type Workload struct {
	Resources map[string]Request `json:"resources,omitempty"`
	// Outputs are the workload's outputs; values may use context,
	// resources and shared placeholders.
	Outputs map[string]string `json:"outputs,omitempty"`
	// Variables is the deprecated name of Outputs; it is merged into them.
	Variables map[string]string `json:"variables,omitempty"`
}

// Validate checks the manifest's fields.
func (m *Manifest) Validate() error {
	var f fieldErrs
	if len(m.Workloads) > MaxManifestItems {
		f.add("workloads", "must have at most %d workloads", MaxManifestItems)
	}
	if len(m.Shared) > MaxManifestItems {
		f.add("shared", "must have at most %d resources", MaxManifestItems)
	}
	sharedAllow := allowed{kinds: kindSet(refContext), contextKeys: manifestCtxKeys, shared: m.Shared}
	for _, a := range sortedKeys(m.Shared) {
		if !keyRE.MatchString(a) {
			f.add("shared."+a, "alias is not a valid name")
		}
		f.request("shared."+a, m.Shared[a], false, sharedAllow)
	}
	for _, w := range sortedKeys(m.Workloads) {
		wl := m.Workloads[w]
		field := "workloads." + w
		if !workloadNameRE.MatchString(w) {
			f.add(field, "workload name does not match %s", workloadNameRE)
		}
		if len(wl.Resources) > MaxManifestItems {
			f.add(field+".resources", "must have at most %d resources", MaxManifestItems)
		}
		allow := allowed{kinds: kindSet(refContext, refResources, refShared), contextKeys: manifestCtxKeys, aliases: wl.Resources, shared: m.Shared}
		for _, a := range sortedKeys(wl.Resources) {
			if !keyRE.MatchString(a) {
				f.add(field+".resources."+a, "alias is not a valid name")
			}
			f.request(field+".resources."+a, wl.Resources[a], false, allow)
		}
		outs := wl.allOutputs()
		for _, k := range sortedKeys(outs) {
			v := outs[k]
			if !keyRE.MatchString(k) {
				f.add(field+".outputs."+k, "is not a valid output name")
			}
			f.placeholders(field+".outputs."+k, v, allow)
		}
	}
	return f.err()
}

func (w Workload) allOutputs() map[string]any {
	out := make(map[string]any, len(w.Outputs)+len(w.Variables))
	for k, v := range w.Variables {
		out[k] = v
	}
	for k, v := range w.Outputs {
		out[k] = v
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// CheckModule checks a module's references against the catalogue: its
// resource type, the types of its dependencies and coprovisioned resources,
// and its provider mappings must exist. The service calls it (after
// Validate) when a module is created or updated; errors name the field.
func (c *Catalogue) CheckModule(m *Module) error {
	types := map[string]bool{}
	for _, t := range c.ResourceTypes {
		types[t.ID] = true
	}
	providers := map[string]bool{}
	for _, p := range c.Providers {
		providers[p.Ref()] = true
	}
	var f fieldErrs
	if !types[m.ResourceType] {
		f.add("resource_type", "resource type %q does not exist", m.ResourceType)
	}
	for _, a := range sortedKeys(m.Dependencies) {
		if t := m.Dependencies[a].Type; !types[t] {
			f.add("dependencies."+a+".type", "resource type %q does not exist", t)
		}
	}
	for i, cp := range m.Coprovisioned {
		if !types[cp.Type] {
			f.add(fmt.Sprintf("coprovisioned[%d].type", i), "resource type %q does not exist", cp.Type)
		}
	}
	for _, k := range sortedKeys(m.ProviderMapping) {
		if !providers[m.ProviderMapping[k]] {
			f.add("provider_mapping."+k, "provider %q does not exist", m.ProviderMapping[k])
		}
	}
	return f.err()
}
