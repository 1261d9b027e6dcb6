package project

import (
	"database/sql"
	"encoding/json"
	"fmt"
)

// OrgDefaultsSQL is implemented by an OrgDefaults that says in SQL what
// OrgDefaults answers: OrgDefaultsSQL(org) is a scalar subquery over the
// SQL expression org (an organization's name) whose value (NULL when the
// organization does not exist) OrgDefaultsOf decodes.
type OrgDefaultsSQL interface {
	OrgDefaultsSQL(org string) string
	OrgDefaultsOf(v string) (executionMode, agentPoolID string, err error)
}

// EffectiveSQL says in SQL what EffectiveIn and the project's settings
// answer for the project whose ID is the SQL expression id: scalar
// subqueries, one value each, for a domain that folds a project's
// defaults into its own statement (a workspace read); EffectiveOf turns
// their values into the answer. ok is false when the organization's
// defaults cannot be said in SQL.
func (s *Service) EffectiveSQL(id string) (cols []string, ok bool) {
	cols = []string{`SELECT p.attrs FROM projects p WHERE p.id = ` + id}
	if s.Orgs == nil {
		return cols, true
	}
	o, isSQL := s.Orgs.(OrgDefaultsSQL)
	if !isSQL {
		return nil, false
	}
	return append(cols, `SELECT (`+o.OrgDefaultsSQL("p.organization_name")+`) FROM projects p WHERE p.id = `+id), true
}

// EffectiveOf returns, from the values of EffectiveSQL's columns, the
// project's effective execution mode and agent pool (as EffectiveIn) and
// its auto-destroy activity duration; an error when the project or its
// organization does not exist (as SystemIn and EffectiveIn fail then).
func (s *Service) EffectiveOf(vals []sql.NullString) (mode, agentPoolID, autoDestroy string, err error) {
	if len(vals) == 0 || !vals[0].Valid {
		return "", "", "", fmt.Errorf("the project does not exist")
	}
	var ps Settings
	if err := json.Unmarshal([]byte(vals[0].String), &ps); err != nil {
		return "", "", "", fmt.Errorf("decoding project settings: %w", err)
	}
	var orgMode, orgPool string
	if s.Orgs != nil {
		o, isSQL := s.Orgs.(OrgDefaultsSQL)
		if !isSQL || len(vals) < 2 || !vals[1].Valid {
			return "", "", "", fmt.Errorf("the project's organization does not exist")
		}
		if orgMode, orgPool, err = o.OrgDefaultsOf(vals[1].String); err != nil {
			return "", "", "", err
		}
	}
	mode, agentPoolID = s.effective(ps, orgMode, orgPool)
	return mode, agentPoolID, ps.AutoDestroyActivityDuration, nil
}
