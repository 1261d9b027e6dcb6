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

// setInputs stores a deployment run's inputs, sealed, and which of them
// take an identity token (names and audiences: nothing secret, the tokens
// themselves are minted per step and never stored), in one statement.
func (s *Service) setInputs(ctx context.Context, runID string, c *Compiled) error {
	vars, identity := c.Variables, c.Identity
	if vars == nil {
		vars = map[string]string{}
	}
	if identity == nil {
		identity = map[string]IdentityInput{}
	}
	b, err := json.Marshal(vars)
	if err != nil {
		return err
	}
	sealed, err := s.keys.SealString(VariablesColumn.Purpose, string(b))
	if err != nil {
		return err
	}
	ids, err := json.Marshal(identity)
	if err != nil {
		return err
	}
	_, err = s.db.Exec(ctx, `UPDATE stack_deployment_runs SET variables = ?, identity_inputs = ? WHERE id = ?`, sealed, string(ids), runID)
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

// StepIdentity says who a deployment run's step is, for its identity
// tokens, and which of its variables take which token.
type StepIdentity struct {
	Organization, ProjectID, StackID, StackName string
	Deployment, DeploymentRunID                 string
	Inputs                                      map[string]IdentityInput
}

// IdentityOf returns the identity inputs of the deployment run whose
// generated configuration version a workspace run plans or applies: nil
// when it is no deployment run's, or its deployment takes no token. (By
// the configuration version, which each deployment run uploads and
// records before its first step starts, not by the step: a step is
// recorded after its workspace run was created, and a runner may claim
// the run's job before that.)
func (s *Service) IdentityOf(ctx context.Context, configVersionID string) (*StepIdentity, error) {
	var id StepIdentity
	var inputs string
	err := s.db.QueryRow(ctx, `SELECT dr.id, dr.deployment_name, dr.identity_inputs, st.id, st.name, st.project_id, st.organization_name
		FROM stack_deployment_runs dr
		JOIN stacks st ON st.id = dr.stack_id
		WHERE dr.configuration_version_id = ? ORDER BY dr.created_at DESC, dr.id LIMIT 1`, configVersionID).
		Scan(&id.DeploymentRunID, &id.Deployment, &inputs, &id.StackID, &id.StackName, &id.ProjectID, &id.Organization)
	if store.IsNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(inputs), &id.Inputs); err != nil {
		return nil, fmt.Errorf("decoding the identity inputs of deployment run %s: %w", id.DeploymentRunID, err)
	}
	if len(id.Inputs) == 0 {
		return nil, nil
	}
	return &id, nil
}
