// Package stack implements HCP Terraform Stacks: a stack is a set of
// components (*.tfcomponent.hcl) deployed to several deployments
// (*.tfdeploy.hcl), each with its own state.
//
// The package is split by concern:
//
//   - model.go and parse*.go read the two kinds of file with hashicorp/hcl/v2
//     into a typed Config and Diagnostics that name file, line, column and
//     show a snippet. The input is untrusted: every problem is a
//     diagnostic, never a panic (see FuzzParse).
//   - approve.go evaluates deployment_auto_approve checks on a plan context.
//   - diag.go holds the diagnostic type the stack-diagnostics API serves.
//   - compile.go writes a deployment's Terraform root module (providers
//     with for_each expanded); imports.go lifts components' import blocks
//     for import mode; upstream.go publishes outputs to linked stacks.
//   - service.go, runs.go and the api files hold configurations,
//     deployment runs and their HTTP API (docs/design/stacks.md).
package stack
