package policy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/terracehq/terrace/internal/core"
)

// EvalTimeout bounds the evaluation of one policy set.
const EvalTimeout = 30 * time.Second

// blockedBuiltins are the OPA built-ins a policy may not call: policies are
// user code running inside the server, so nothing that reaches the network
// or the server's own runtime.
var blockedBuiltins = map[string]bool{
	"http.send": true, "net.lookup_ip_addr": true, "opa.runtime": true,
}

// capabilities is what policies may use: this OPA's built-ins minus the
// blocked ones. Built on first use: a server that never evaluates a policy
// does not build (nor keep) the table of every built-in at start.
var capabilities = sync.OnceValue(func() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	kept := c.Builtins[:0]
	for _, b := range c.Builtins {
		if !blockedBuiltins[b.Name] {
			kept = append(kept, b)
		}
	}
	c.Builtins = kept
	c.AllowNet = []string{}
	return c
})

// parseModule parses a Rego source: Rego v1 first, then the v0 syntax
// (rules without `if`) that policies written for OPA before 1.0 use, as
// go-tfe's own fixtures do. The error names the file and both attempts'
// first problem.
func parseModule(filename, src string) (*ast.Module, error) {
	m, err := ast.ParseModuleWithOpts(filename, src, ast.ParserOptions{RegoVersion: ast.RegoV1, Capabilities: capabilities()})
	if err == nil {
		return m, nil
	}
	m, err0 := ast.ParseModuleWithOpts(filename, src, ast.ParserOptions{RegoVersion: ast.RegoV0, Capabilities: capabilities()})
	if err0 == nil {
		return m, nil
	}
	return nil, core.Invalid("%s is not valid Rego: %s", filename, firstLine(err.Error()))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// checkQuery makes sure a query parses as Rego.
func checkQuery(q string) error {
	if _, err := ast.ParseBody(q); err != nil {
		return core.Invalid("query %q is not a valid Rego query: %s", q, firstLine(err.Error()))
	}
	return nil
}

// opaPolicy is one query to evaluate in a set.
type opaPolicy struct {
	Name        string
	Description string
	Query       string
	Level       Level
}

// Outcome is one policy's result in a set (go-tfe's Outcome).
type Outcome struct {
	EnforcementLevel Level  `json:"enforcement_level"`
	Query            string `json:"query"`
	Status           string `json:"status"`
	PolicyName       string `json:"policy_name"`
	Description      string `json:"description"`
}

// Outcome statuses.
const (
	OutcomePassed  = "passed"
	OutcomeFailed  = "failed"
	OutcomeErrored = "errored"
)

// evalOPA compiles modules (file name → source) and evaluates every
// policy's query on input. A query passes when its result is undefined or
// an empty array or set, and fails when it holds anything (HCP Terraform's
// rule: the query returns the violations). A compile error errors the
// whole set; a query that returns something else errors its policy.
func evalOPA(ctx context.Context, modules map[string]string, policies []opaPolicy, input map[string]any) ([]Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, EvalTimeout)
	defer cancel()
	names := make([]string, 0, len(modules))
	for n := range modules {
		names = append(names, n)
	}
	sort.Strings(names)
	parsed := map[string]*ast.Module{}
	for _, n := range names {
		m, err := parseModule(n, modules[n])
		if err != nil {
			return nil, err
		}
		parsed[n] = m
	}
	compiler := ast.NewCompiler().WithCapabilities(capabilities()).WithEnablePrintStatements(false)
	if compiler.Compile(parsed); compiler.Failed() {
		return nil, core.Invalid("compiling the policies: %s", firstLine(compiler.Errors.Error()))
	}
	inputValue, err := ast.InterfaceToValue(input)
	if err != nil {
		return nil, fmt.Errorf("building the policy input: %w", err)
	}
	out := make([]Outcome, 0, len(policies))
	for _, p := range policies {
		o := Outcome{EnforcementLevel: p.Level, Query: p.Query, PolicyName: p.Name, Description: p.Description, Status: OutcomePassed}
		rs, err := rego.New(rego.Query(p.Query), rego.Compiler(compiler), rego.ParsedInput(inputValue),
			rego.Capabilities(capabilities()), rego.StrictBuiltinErrors(true)).Eval(ctx)
		switch {
		case err != nil:
			o.Status, o.Description = OutcomeErrored, joinDesc(p.Description, "evaluation failed: "+firstLine(err.Error()))
		case len(rs) == 0 || len(rs[0].Expressions) == 0:
			// undefined: no violations
		default:
			switch v := rs[0].Expressions[0].Value.(type) {
			case []any:
				if len(v) > 0 {
					o.Status = OutcomeFailed
				}
			case map[string]any:
				if len(v) > 0 {
					o.Status = OutcomeFailed
				}
			default:
				o.Status, o.Description = OutcomeErrored, joinDesc(p.Description, fmt.Sprintf("the query must return an array or set of violations, not %T", v))
			}
		}
		out = append(out, o)
	}
	return out, nil
}

func joinDesc(desc, msg string) string {
	if desc == "" {
		return msg
	}
	return desc + " (" + msg + ")"
}
