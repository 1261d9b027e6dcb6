package stack

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
)

// VariablesColumn holds a deployment run's inputs (name → HCL
// expression, sensitive ones among them) as sealed JSON. They are read
// and written only here, not with the rest of the run: begin sets them
// once, each step reads them.
var VariablesColumn = seal.Column{Table: "stack_deployment_runs", IDColumn: "id", Column: "variables", Purpose: "stack_deployment_runs.variables"}

// PublishedValueColumn holds the values a stack publishes (publish_output
// blocks, which may carry a sensitive component output) as sealed
// Terraform JSON.
var PublishedValueColumn = seal.Column{Table: "stack_published_outputs", IDColumn: "id", Column: "value", Purpose: "stack_published_outputs.value"}

// setVariables seals and stores a deployment run's inputs.
func (s *Service) setVariables(ctx context.Context, runID string, vars map[string]string) error {
	if vars == nil {
		vars = map[string]string{}
	}
	b, err := json.Marshal(vars)
	if err != nil {
		return err
	}
	sealed, err := s.keys.SealString(VariablesColumn.Purpose, string(b))
	if err != nil {
		return err
	}
	_, err = s.db.Exec(ctx, `UPDATE stack_deployment_runs SET variables = ? WHERE id = ?`, sealed, runID)
	return err
}

// variables reads a deployment run's inputs.
func (s *Service) variables(ctx context.Context, runID string) (map[string]string, error) {
	var stored string
	if err := s.db.QueryRow(ctx, `SELECT variables FROM stack_deployment_runs WHERE id = ?`, runID).Scan(&stored); err != nil {
		if store.IsNoRows(err) {
			return nil, fmt.Errorf("deployment run %s not found", runID)
		}
		return nil, err
	}
	plain, err := s.keys.OpenString(VariablesColumn.Purpose, stored)
	if err != nil {
		return nil, fmt.Errorf("deployment run %s: %w", runID, err)
	}
	vars := map[string]string{}
	if err := json.Unmarshal([]byte(plain), &vars); err != nil {
		return nil, fmt.Errorf("decoding the inputs of deployment run %s: %w", runID, err)
	}
	return vars, nil
}
