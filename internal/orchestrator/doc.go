// Package orchestrator is Terrace's resource-graph orchestrator (seed 003,
// spec ../shared/spec/orchestrator.md): platform teams describe resource
// types, modules (Terraform code plus the dependencies and coprovisioned
// resources it needs), module rules and providers; developers deploy a
// manifest of workloads and shared resources. The package is pure: no
// storage, no HTTP. The server and CLI call it like this:
//
//	// configuration objects (create/update): field-named 422 errors
//	err := module.Validate()              // *ValidationError; FieldErrors(err) → []FieldError{Field, Detail}
//	err = catalogue.CheckModule(module)    // references: resource types, providers
//	err = rule.Validate(); err = manifest.Validate() // likewise for every object type
//
//	// a deployment or dry run
//	g, err := orchestrator.Compile(&catalogue, orchestrator.Context{OrgID, ProjectID, EnvID, EnvTypeID}, &manifest)
//	// err is *ValidationError (malformed manifest) or *CompileError listing every
//	// node error at once (NodeError{Node, Code, Detail}); core.KindOf(err) is
//	// KindInvalid for both. g is non-nil with a CompileError, for display.
//	g.JSON()        // {"nodes":[{type,class,id,module}],"edges":[{from,to}]}, A→B = A depends on B
//	g.Mermaid()     // flowchart LR in the seed's arrow direction
//	files, err := g.Terraform() // "main.tf", "variables.tf" (if providers use ${var.X}), "modules/<id>[/<version>]/main.tf"
//	g.WriteTerraform(dir)
//
// The generated root module has no backend or cloud block: it is uploaded
// as a configuration version of the environment's workspace, which owns
// state. It has two sensitive outputs: "workloads" (workload name → its
// evaluated outputs) and "resources" ("<type>.<class>#<id>" → the node's
// module outputs, including any metadata output a module publishes).
//
// Graph construction (Compile):
//   - A node is (type, class, id); class defaults to "default". Each
//     workload is a node (workload, default, <name>) carrying the workload's
//     outputs; a module for type "workload" is optional. Workload resources
//     default to id "workloads.<workload>.<alias>", shared ones to
//     "shared.<alias>"; equal coordinates are one node (params must agree).
//   - Each node is matched to a module by the module rules effective in the
//     environment (project/env type/env null or equal); per (type, class,
//     resource id) the most specific rule wins (env 4, project 2, env type
//     1); the exact resource id is tried before a rule without one.
//   - dependencies add nodes and edges current → dependency; a dependency's
//     class defaults to "default", its id to the current node's id; "@" in
//     class or id stands for the current node's value ("@-beta", "@-primary").
//   - coprovisioned entries add nodes with no edge, or coprovisioned →
//     current (is_dependent_on_current), and after expansion every consumer
//     of current also depends on the coprovisioned node
//     (copy_dependents_from_current, repeated until stable).
//   - resources/shared/self placeholders in inputs, params and outputs add
//     edges to their targets; select placeholders are evaluated on the
//     finished graph and add edges too. Params placeholders resolve in the
//     scope of whoever defined the params (the parent module or manifest).
//   - Then cycles (every node on one, with a path) and params are checked.
//     Params may fill any variable of the module and win over
//     module_inputs; module_params, where declared, type them (bare
//     placeholders skipped) and require them. When the module's variables
//     are known (inline code, or Catalogue.Interfaces for other sources), a
//     param that is no variable, and a variable with no default that
//     neither inputs nor params set, are node errors.
//
// A Graph caches parsed templates and select results: use one Graph from
// one goroutine at a time (Compile itself is safe to call concurrently).
//
// See render.go for how placeholders become Terraform expressions.
package orchestrator
