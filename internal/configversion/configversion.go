// Package configversion keeps configuration versions: the Terraform
// configurations (gzipped tarballs, "slugs") uploaded to a workspace for
// runs to plan and apply.
//
// A version is created "pending" with a capability upload URL. The PUT to
// that URL streams the archive into the blob store, unpacks it into a
// temporary folder with slug.Unpack to prove it is safe (no path traversal,
// no links leaving the archive, within the size limits), and only then marks
// the version "uploaded". A hostile or broken archive marks it "errored" with
// a message naming the problem. The version row points at its blob only once
// the blob is complete, so a crash never shows an "uploaded" version without
// its archive.
package configversion

import (
	"context"
	"time"
)

// Status is a configuration version's state.
type Status string

// Statuses (go-tfe's ConfigurationStatus).
const (
	StatusPending  Status = "pending"
	StatusFetching Status = "fetching"
	StatusUploaded Status = "uploaded"
	StatusArchived Status = "archived"
	StatusErrored  Status = "errored"
	// StatusSoftDeleted: a workspace admin set the archive aside
	// (Terraform Enterprise's soft delete); it cannot be downloaded or run
	// until restored. StatusPermanentlyDeleted: then deleted for good.
	StatusSoftDeleted        Status = "backing_data_soft_deleted"
	StatusPermanentlyDeleted Status = "backing_data_permanently_deleted"
)

// SourceAPI is the source of versions created through the API.
const SourceAPI = "tfe-api"

// ConfigurationVersion is one uploaded (or to be uploaded) configuration.
type ConfigurationVersion struct {
	ID            string
	WorkspaceID   string
	Status        Status
	Source        string
	AutoQueueRuns bool
	Speculative   bool
	Provisional   bool
	// Error is a short code and ErrorMessage a sentence when Status is errored.
	Error        string
	ErrorMessage string
	// SHA256 and Size describe the stored archive (empty until uploaded).
	SHA256           string
	Size             int64
	StatusTimestamps StatusTimestamps
	CreatedAt        time.Time
	UpdatedAt        time.Time
	// CreatedByToken is the ID of the token that created the version; a
	// run queued by its upload acts as that token's holder ("" when a
	// server-side producer created it).
	CreatedByToken string
	// Ingress is set for a version made from a commit.
	Ingress *Ingress

	blobKey string
}

// Ingress is where a version made from a commit came from (HCP
// Terraform's ingress attributes): its commit and branch or tag, a pull
// request's number and title, and who pushed.
type Ingress struct {
	Branch            string `json:"branch"`
	CloneURL          string `json:"clone-url"`
	CommitMessage     string `json:"commit-message"`
	CommitSHA         string `json:"commit-sha"`
	CommitURL         string `json:"commit-url"`
	CompareURL        string `json:"compare-url"`
	Identifier        string `json:"identifier"`
	IsPullRequest     bool   `json:"is-pull-request"`
	OnDefaultBranch   bool   `json:"on-default-branch"`
	PullRequestNumber int    `json:"pull-request-number"`
	PullRequestURL    string `json:"pull-request-url"`
	PullRequestTitle  string `json:"pull-request-title"`
	Tag               string `json:"tag"`
	SenderUsername    string `json:"sender-username"`
	SenderHTMLURL     string `json:"sender-html-url"`
}

// StatusTimestamps records when the version entered each state.
type StatusTimestamps struct {
	StartedAt  *time.Time `json:"started-at,omitempty"`
	FinishedAt *time.Time `json:"finished-at,omitempty"`
	ErroredAt  *time.Time `json:"errored-at,omitempty"`
	ArchivedAt *time.Time `json:"archived-at,omitempty"`
}

// Workspace is what this package needs to know about a workspace.
type Workspace struct {
	ID, Name, Organization string
}

// Workspaces looks workspaces up for the caller in ctx. Get must answer a
// core.KindNotFound error when the workspace does not exist or the caller
// may not see it.
type Workspaces interface {
	Get(ctx context.Context, id string) (*Workspace, error)
}

// QueueRunChecker may be implemented by the Workspaces adapter to refuse
// creating and archiving versions to callers who can see a workspace but
// may not queue runs on it (core.Forbidden). Without it, seeing the
// workspace is enough.
type QueueRunChecker interface {
	CheckQueueRun(ctx context.Context, ws *Workspace) error
}

// UploadHook is called once a version with auto-queue-runs becomes
// uploaded (the run domain queues a run). It runs after the upload has
// been committed, with a context that outlives the request and carries no
// caller. An error (the run could not be queued) is recorded on the
// version as its error and error-message; it stays uploaded.
type UploadHook func(ctx context.Context, cv *ConfigurationVersion) error

// ErrorQueueFailed is the error code of an uploaded version whose
// auto-queued run could not be created.
const ErrorQueueFailed = "run-queue-failed"

// ArchiveCheck refuses (with an error, typically core.Conflict) to archive
// a version that an active run still uses. nil allows it.
type ArchiveCheck func(ctx context.Context, cv *ConfigurationVersion) error

// InUse reports whether any run references the version; an uploaded
// version that is in use cannot be replaced by a different upload. nil
// means never in use.
type InUse func(ctx context.Context, cv *ConfigurationVersion) (bool, error)

// CreateOptions are the attributes of a new version.
type CreateOptions struct {
	AutoQueueRuns *bool `json:"auto-queue-runs"`
	Speculative   *bool `json:"speculative"`
	Provisional   *bool `json:"provisional"`
	// Source defaults to "tfe-api" (not settable through the API).
	Source string `json:"-"`
	// Ingress, for a version made from a commit (not settable through the
	// API).
	Ingress *Ingress `json:"-"`
}
