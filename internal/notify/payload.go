package notify

import (
	"crypto/hmac"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Event is what happened, independent of the destination's shape.
type Event struct {
	Trigger       Trigger
	Message       string // "Run Applied", "Run Canceled", …
	RunID         string
	RunURL        string
	RunMessage    string
	RunCreatedAt  time.Time
	RunCreatedBy  string
	RunStatus     string
	RunUpdatedAt  time.Time
	RunUpdatedBy  string
	WorkspaceID   string
	WorkspaceName string
	Organization  string

	// assessment, when set, makes this an assessment notification (the
	// v2 payload for generic destinations); baseURL builds its links.
	assessment *assessmentDetails
	baseURL    string
}

// Sign is the X-TFE-Notification-Signature of body: hex HMAC-SHA512 keyed
// with the configuration's token.
func Sign(token string, body []byte) string {
	m := hmac.New(sha512.New, []byte(token))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether sig is body's signature under token, in constant
// time (for receivers, and for tests that act as one).
func Verify(token string, body []byte, sig string) bool {
	want, err := hex.DecodeString(sig)
	if err != nil {
		return false
	}
	m := hmac.New(sha512.New, []byte(token))
	m.Write(body)
	return hmac.Equal(m.Sum(nil), want)
}

// nullable renders "" as JSON null.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nullTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}

// genericPayload is HCP Terraform's v1 run payload.
type genericPayload struct {
	PayloadVersion int                   `json:"payload_version"`
	ConfigID       string                `json:"notification_configuration_id"`
	RunURL         *string               `json:"run_url"`
	RunID          *string               `json:"run_id"`
	RunMessage     *string               `json:"run_message"`
	RunCreatedAt   *string               `json:"run_created_at"`
	RunCreatedBy   *string               `json:"run_created_by"`
	WorkspaceID    *string               `json:"workspace_id"`
	WorkspaceName  *string               `json:"workspace_name"`
	Organization   *string               `json:"organization_name"`
	Notifications  []genericNotification `json:"notifications"`
}

type genericNotification struct {
	Message      string  `json:"message"`
	Trigger      string  `json:"trigger"`
	RunStatus    *string `json:"run_status"`
	RunUpdatedAt *string `json:"run_updated_at"`
	RunUpdatedBy *string `json:"run_updated_by"`
}

// Body renders the event in the configuration's destination shape.
func Body(c *Configuration, e Event) ([]byte, error) {
	switch c.Destination {
	case Slack:
		return json.Marshal(slackBody(e))
	case MicrosoftTeams:
		return json.Marshal(teamsBody(e))
	case Email:
		return json.Marshal(emailBody(e))
	}
	if e.assessment != nil {
		return json.Marshal(v2Payload{PayloadVersion: "2", ConfigID: c.ID, ConfigURL: e.baseURL + "/api/v2/notification-configurations/" + c.ID,
			TriggerScope: "assessment", Trigger: string(e.Trigger), Message: e.Message, Details: e.assessment})
	}
	return json.Marshal(genericPayload{
		PayloadVersion: 1, ConfigID: c.ID,
		RunURL: nullable(e.RunURL), RunID: nullable(e.RunID), RunMessage: nullable(e.RunMessage),
		RunCreatedAt: nullTime(e.RunCreatedAt), RunCreatedBy: nullable(e.RunCreatedBy),
		WorkspaceID: nullable(e.WorkspaceID), WorkspaceName: nullable(e.WorkspaceName), Organization: nullable(e.Organization),
		Notifications: []genericNotification{{
			Message: e.Message, Trigger: string(e.Trigger), RunStatus: nullable(e.RunStatus),
			RunUpdatedAt: nullTime(e.RunUpdatedAt), RunUpdatedBy: nullable(e.RunUpdatedBy),
		}},
	})
}

// verificationEvent is the test request: every run and workspace field null.
func verificationEvent() Event {
	return Event{Trigger: verification, Message: "Verification of test"}
}

func (e Event) title() string {
	if e.Trigger == verification {
		return e.Message
	}
	return fmt.Sprintf("%s: %s/%s", e.Message, e.Organization, e.WorkspaceName)
}

func (e Event) color() string {
	switch e.Trigger {
	case RunErrored, AssessmentFailed, AssessmentCheck:
		return "#e03875"
	case RunCompleted:
		return "#2eb039"
	case RunNeedsAttention, AssessmentDrifted:
		return "#ffc107"
	}
	return "#5c4ee5"
}

// slackBody is an incoming-webhook message with one attachment.
func slackBody(e Event) map[string]any {
	fields := []map[string]any{}
	if e.RunID != "" {
		fields = append(fields,
			map[string]any{"title": "Run", "value": e.RunID, "short": true},
			map[string]any{"title": "Status", "value": e.RunStatus, "short": true})
	}
	att := map[string]any{"fallback": e.title(), "color": e.color(), "title": e.title(), "text": e.RunMessage, "fields": fields}
	if e.RunURL != "" {
		att["title_link"] = e.RunURL
	}
	return map[string]any{"username": "Terrace", "text": e.title(), "attachments": []any{att}}
}

// teamsBody is an Office 365 connector MessageCard.
func teamsBody(e Event) map[string]any {
	card := map[string]any{
		"@type": "MessageCard", "@context": "http://schema.org/extensions",
		"summary": e.title(), "title": e.title(), "text": e.RunMessage, "themeColor": e.color()[1:],
	}
	if e.RunID != "" {
		card["sections"] = []any{map[string]any{"facts": []any{
			map[string]any{"name": "Run", "value": e.RunID},
			map[string]any{"name": "Status", "value": e.RunStatus},
		}}}
	}
	if e.RunURL != "" {
		card["potentialAction"] = []any{map[string]any{"@type": "OpenUri", "name": "View run",
			"targets": []any{map[string]any{"os": "default", "uri": e.RunURL}}}}
	}
	return card
}
