package runtask

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/notify"
)

// Payload is the body of the request to a task service (payload version
// 1, as HCP Terraform sends it). Fields that are null without a value are
// pointers.
type Payload struct {
	PayloadVersion                  int          `json:"payload_version"`
	Stage                           Stage        `json:"stage"`
	AccessToken                     string       `json:"access_token"`
	Capabilities                    Capabilities `json:"capabilities"`
	ConfigurationVersionDownloadURL *string      `json:"configuration_version_download_url"`
	ConfigurationVersionID          string       `json:"configuration_version_id"`
	IsSpeculative                   bool         `json:"is_speculative"`
	OrganizationName                string       `json:"organization_name"`
	PlanJSONAPIURL                  *string      `json:"plan_json_api_url"`
	RunAppURL                       string       `json:"run_app_url"`
	RunCreatedAt                    string       `json:"run_created_at"`
	RunCreatedBy                    string       `json:"run_created_by"`
	RunID                           string       `json:"run_id"`
	RunMessage                      string       `json:"run_message"`
	TaskResultCallbackURL           string       `json:"task_result_callback_url"`
	TaskResultEnforcementLevel      Enforcement  `json:"task_result_enforcement_level"`
	TaskResultID                    string       `json:"task_result_id"`
	VCSBranch                       *string      `json:"vcs_branch"`
	VCSCommitURL                    *string      `json:"vcs_commit_url"`
	VCSPullRequestURL               *string      `json:"vcs_pull_request_url"`
	VCSRepoURL                      *string      `json:"vcs_repo_url"`
	WorkspaceAppURL                 string       `json:"workspace_app_url"`
	WorkspaceID                     string       `json:"workspace_id"`
	WorkspaceName                   string       `json:"workspace_name"`
	WorkspaceWorkingDirectory       string       `json:"workspace_working_directory"`
}

// Capabilities tell the service what the callback accepts.
type Capabilities struct {
	Outcomes bool `json:"outcomes"`
}

// TestToken is the access token of a verification request: task services
// recognise the test by it.
const TestToken = "test-token"

// testPayload is the verification request of a task: dummy run data, as
// HCP Terraform sends it on create.
func (s *Service) testPayload(t *Task) Payload {
	return Payload{PayloadVersion: 1, Stage: PrePlan, AccessToken: TestToken, Capabilities: Capabilities{Outcomes: true},
		ConfigurationVersionID: "cv-test", OrganizationName: t.Organization,
		RunAppURL: s.o.BaseURL + "/app/" + t.Organization + "/runs/run-test", RunCreatedAt: core.Now().Format(time.RFC3339),
		RunCreatedBy: "terrace", RunID: "run-test", RunMessage: "Test run task request",
		TaskResultCallbackURL: s.o.BaseURL + "/api/v2/task-results/taskrs-test/callback", TaskResultEnforcementLevel: Advisory,
		TaskResultID: "taskrs-test", WorkspaceAppURL: s.o.BaseURL + "/app/" + t.Organization + "/workspaces/test",
		WorkspaceID: "ws-test", WorkspaceName: "test"}
}

// Sign is the X-TFC-Task-Signature of body: hex HMAC-SHA512 keyed with
// the task's HMAC key (the notifications' signature, notify.Sign), and the
// empty string without a key.
func Sign(key string, body []byte) string {
	if key == "" {
		return ""
	}
	return notify.Sign(key, body)
}

// maxAnswer bounds what is read of a task service's answer.
const maxAnswer = 4 << 10

// send POSTs body to the task's URL, signed, bounded by Timeout. It
// returns nil when the service answered 200, and otherwise an error that
// says what came back (never the key or the token).
func (s *Service) send(ctx context.Context, pool, url, key string, body []byte) error {
	header := map[string]string{"Content-Type": "application/json", "User-Agent": "TFC/1.0 (+https://app.terraform.io; TFC)",
		"X-TFC-Task-Signature": Sign(key, body)}
	if pool != "" {
		return s.forward(ctx, pool, url, header, body)
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("invalid URL %q", url)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := s.o.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "Post "))
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxAnswer))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered HTTP %d (a task service must answer 200)", url, res.StatusCode)
	}
	return nil
}

// forwardGrace is what a forwarded request gets beyond the request's own
// timeout: the time for an agent of the pool to take it.
const forwardGrace = 20 * time.Second

// forward sends a request through an agent of pool (the task's service is
// in the agents' network): signed here, so that the agent never holds the
// task's HMAC key.
func (s *Service) forward(ctx context.Context, pool, url string, header map[string]string, body []byte) error {
	if s.o.Forwards == nil {
		return fmt.Errorf("the task names agent pool %s, and this server has no request forwarding", pool)
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout+forwardGrace)
	defer cancel()
	res, err := s.o.Forwards.Do(ctx, pool, url, header, body)
	if err != nil {
		return fmt.Errorf("forwarding through agent pool %s: %v", pool, err)
	}
	if res.Status == 0 {
		return fmt.Errorf("the agent of pool %s could not reach %s: %s", pool, url, res.Error)
	}
	if res.Status != http.StatusOK {
		return fmt.Errorf("%s answered HTTP %d through agent pool %s (a task service must answer 200)", url, res.Status, pool)
	}
	return nil
}

// verify sends the test request to a task; anything but a 200 refuses
// the create or update.
func (s *Service) verify(ctx context.Context, t *Task) error {
	body, err := json.Marshal(s.testPayload(t))
	if err != nil {
		return err
	}
	if err := s.send(ctx, t.AgentPoolID, t.URL, t.hmacKey, body); err != nil {
		return core.Invalid("verification of the run task failed: %v", err)
	}
	return nil
}
