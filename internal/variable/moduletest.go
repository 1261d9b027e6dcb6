package variable

import (
	"context"
	"fmt"
	"net/http"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// Module test variables: the environment variables of a private registry
// module's test runs (internal/moduletest), as HCP Terraform's: category
// env only. They are owned by the module (their workspace_id holds its
// ID, mod-…, which no workspace has) and go with it
// (DeleteWorkspaceVariables with the module's ID). The module domain
// resolves the module and checks that the caller may manage it
// (ModuleTests); values are sealed and redacted like every variable's.

// ModuleTests resolves the module of a test variable route
// (organizations/{org}/tests/registry-modules/{registry}/{ns}/{name}/{provider}/vars),
// refusing a caller who may not manage its tests.
type ModuleTests func(r *http.Request) (org, moduleID string, err error)

func moduleOwner(org, moduleID string) owner { return owner{org: org, workspaceID: moduleID} }

// envOnly refuses a test variable of another category.
func envOnly(opts VarOptions) error {
	if opts.Category != nil && *opts.Category != CategoryEnv {
		return core.Invalid("category: a module's test variables are environment variables (category \"env\"), not %q", string(*opts.Category))
	}
	return nil
}

// ModuleTestVariables returns a module's test variables, values included
// (the test run executor's; responses go through toJSONVar).
func (s *Service) ModuleTestVariables(ctx context.Context, org, moduleID string) ([]*Variable, error) {
	return s.listVars(ctx, moduleOwner(org, moduleID))
}

// RedactedModuleTestVariables returns a module's test variables to show
// them: a sensitive one's value is never opened (it is empty), the others'
// are. The caller resolved the module and checked that the caller may
// manage its tests (ModuleTests).
func (s *Service) RedactedModuleTestVariables(ctx context.Context, org, moduleID string) ([]*Variable, error) {
	w, arg := moduleOwner(org, moduleID).where()
	return store.All(ctx, s.db, func(sc store.Scanner) (*Variable, error) {
		v, err := scanVar(sc)
		if err != nil {
			return nil, err
		}
		if v.Sensitive {
			v.Value = ""
		} else if v.Value, err = s.Keys.OpenString(ValueColumn.Purpose, v.Value); err != nil {
			return nil, fmt.Errorf("variable %s: %w", v.ID, err)
		}
		return v, nil
	}, `SELECT `+varCols+` FROM variables WHERE `+w+` ORDER BY created_at, id`, arg)
}

// CreateModuleTestVariable adds a test variable (category env when unset).
func (s *Service) CreateModuleTestVariable(ctx context.Context, org, moduleID string, opts VarOptions) (*Variable, error) {
	if opts.Category == nil {
		env := CategoryEnv
		opts.Category = &env
	}
	if err := envOnly(opts); err != nil {
		return nil, err
	}
	return s.createVar(ctx, moduleOwner(org, moduleID), opts)
}

// UpdateModuleTestVariable changes a test variable.
func (s *Service) UpdateModuleTestVariable(ctx context.Context, org, moduleID, id string, opts VarOptions) (*Variable, error) {
	if err := envOnly(opts); err != nil {
		return nil, err
	}
	return s.updateVar(ctx, moduleOwner(org, moduleID), id, opts)
}

// DeleteModuleTestVariable removes a test variable.
func (s *Service) DeleteModuleTestVariable(ctx context.Context, org, moduleID, id string) error {
	return s.deleteVar(ctx, moduleOwner(org, moduleID), id)
}

// RegisterModuleTests adds the module test variable routes to mux.
func (a *API) RegisterModuleTests(mux *http.ServeMux, module ModuleTests) {
	const base = "/api/v2/organizations/{org}/tests/registry-modules/{registry}/{ns}/{name}/{provider}/vars"
	with := func(f func(w http.ResponseWriter, r *http.Request, org, moduleID string)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			org, id, err := module(r)
			if err != nil {
				tfeapi.Error(w, r, err)
				return
			}
			f(w, r, org, id)
		}
	}
	mux.HandleFunc("GET "+base, with(func(w http.ResponseWriter, r *http.Request, org, id string) {
		a.respondVarListAs(w, r, toModuleVar, func() ([]*Variable, error) { return a.Service.ModuleTestVariables(r.Context(), org, id) })
	}))
	mux.HandleFunc("POST "+base, with(func(w http.ResponseWriter, r *http.Request, org, id string) {
		opts, err := decodeVar(w, r)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		tfeapi.Reply(w, r, http.StatusCreated, toModuleVar)(a.Service.CreateModuleTestVariable(r.Context(), org, id, opts))
	}))
	mux.HandleFunc("GET "+base+"/{var}", with(func(w http.ResponseWriter, r *http.Request, org, id string) {
		tfeapi.Reply(w, r, http.StatusOK, toModuleVar)(a.Service.getVar(r.Context(), a.Service.db, moduleOwner(org, id), r.PathValue("var"), false))
	}))
	mux.HandleFunc("PATCH "+base+"/{var}", with(func(w http.ResponseWriter, r *http.Request, org, id string) {
		opts, err := decodeVar(w, r)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		tfeapi.Reply(w, r, http.StatusOK, toModuleVar)(a.Service.UpdateModuleTestVariable(r.Context(), org, id, r.PathValue("var"), opts))
	}))
	mux.HandleFunc("DELETE "+base+"/{var}", with(func(w http.ResponseWriter, r *http.Request, org, id string) {
		tfeapi.NoContent(w, r, a.Service.DeleteModuleTestVariable(r.Context(), org, id, r.PathValue("var")))
	}))
}

// toModuleVar is toJSONVar without the configurable relationship (a
// module is no workspace).
func toModuleVar(v *Variable) *jsonVar {
	j := toJSONVar(v)
	j.Configurable = nil
	return j
}
