package notify

import (
	"context"
	"fmt"
	"time"
)

// AssessmentResult is one health assessment as notifications show it
// (HCP Terraform's new_assessment_result / prior_assessment_result).
type AssessmentResult struct {
	ID                 string
	Succeeded, Drifted bool
	AllChecksSucceeded bool
	ResourcesDrifted   int
	ResourcesUndrifted int
	ChecksPassed       int
	ChecksFailed       int
	ChecksErrored      int
	ChecksUnknown      int
	CreatedAt          time.Time
}

// AssessmentEvent is an assessment that fires a trigger: AssessmentDrifted,
// AssessmentCheck or AssessmentFailed.
type AssessmentEvent struct {
	Trigger                Trigger
	WorkspaceID, ProjectID string
	WorkspaceName          string
	Organization           string
	New                    AssessmentResult
	Prior                  *AssessmentResult // nil for a workspace's first assessment
}

// assessmentDetails is the details object of the v2 assessment payload.
type assessmentDetails struct {
	New           jsonAssessment  `json:"new_assessment_result"`
	Prior         *jsonAssessment `json:"prior_assessment_result"`
	WorkspaceID   string          `json:"workspace_id"`
	WorkspaceName string          `json:"workspace_name"`
	Organization  string          `json:"organization_name"`
}

type jsonAssessment struct {
	ID                 string `json:"id"`
	URL                string `json:"url"`
	Succeeded          bool   `json:"succeeded"`
	Drifted            bool   `json:"drifted"`
	AllChecksSucceeded bool   `json:"all_checks_succeeded"`
	ResourcesDrifted   int    `json:"resources_drifted"`
	ResourcesUndrifted int    `json:"resources_undrifted"`
	ChecksPassed       int    `json:"checks_passed"`
	ChecksFailed       int    `json:"checks_failed"`
	ChecksErrored      int    `json:"checks_errored"`
	ChecksUnknown      int    `json:"checks_unknown"`
	CreatedAt          string `json:"created_at"`
}

func (s *Service) jsonAssessment(a AssessmentResult) jsonAssessment {
	return jsonAssessment{ID: a.ID, URL: s.o.BaseURL + "/api/v2/assessment-results/" + a.ID, Succeeded: a.Succeeded, Drifted: a.Drifted,
		AllChecksSucceeded: a.AllChecksSucceeded, ResourcesDrifted: a.ResourcesDrifted, ResourcesUndrifted: a.ResourcesUndrifted,
		ChecksPassed: a.ChecksPassed, ChecksFailed: a.ChecksFailed, ChecksErrored: a.ChecksErrored, ChecksUnknown: a.ChecksUnknown,
		CreatedAt: a.CreatedAt.UTC().Format(time.RFC3339)}
}

var assessmentMessages = map[Trigger]string{
	AssessmentDrifted: "Drift Detected",
	AssessmentCheck:   "Check Failure Detected",
	AssessmentFailed:  "Health Assessment Failed",
}

// Assessment puts an assessment notification in the outbox for every
// enabled configuration of the workspace (and its project) subscribed to
// its trigger. Generic destinations get HCP Terraform's v2 payload.
func (s *Service) Assessment(ctx context.Context, a AssessmentEvent) error {
	msg, ok := assessmentMessages[a.Trigger]
	if !ok {
		return fmt.Errorf("%q is not an assessment trigger", a.Trigger)
	}
	d := &assessmentDetails{New: s.jsonAssessment(a.New), WorkspaceID: a.WorkspaceID, WorkspaceName: a.WorkspaceName, Organization: a.Organization}
	if a.Prior != nil {
		p := s.jsonAssessment(*a.Prior)
		d.Prior = &p
	}
	summary := fmt.Sprintf("%d resources drifted, %d checks failed", a.New.ResourcesDrifted, a.New.ChecksFailed)
	if !a.New.Succeeded {
		summary = "the assessment did not finish"
	}
	e := Event{Trigger: a.Trigger, Message: msg, RunMessage: summary, WorkspaceID: a.WorkspaceID, WorkspaceName: a.WorkspaceName,
		Organization: a.Organization, assessment: d, baseURL: s.o.BaseURL}
	return s.enqueueEvent(ctx, a.WorkspaceID, a.ProjectID, e)
}

// v2Payload is HCP Terraform's payload for workspace and assessment
// notifications.
type v2Payload struct {
	PayloadVersion string             `json:"payload_version"`
	ConfigID       string             `json:"notification_configuration_id"`
	ConfigURL      string             `json:"notification_configuration_url"`
	TriggerScope   string             `json:"trigger_scope"`
	Trigger        string             `json:"trigger"`
	Message        string             `json:"message"`
	Details        *assessmentDetails `json:"details"`
}
