package vcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/outbox"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/stack"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/vcshost"
)

// Workspace is what ingress reads of a workspace.
type Workspace struct {
	ID, Organization, Name, WorkingDirectory string
	FileTriggersEnabled, QueueAllRuns        bool
	SpeculativeEnabled                       bool
	TriggerPrefixes, TriggerPatterns         []string
}

// Ingress is what the VCS domain needs to turn a commit into a run,
// acting for the system; the composition root provides it.
type Ingress struct {
	// Workspace reads a workspace (core.NotFound when it is gone).
	Workspace func(ctx context.Context, id string) (*Workspace, error)
	// Configure creates a configuration version of w from a commit's
	// archive (source: the provider, as HCP Terraform names a VCS
	// version's source; speculative: a pull request's) and returns its ID.
	Configure func(ctx context.Context, w *Workspace, archive []byte, source string, speculative bool, origin Origin) (string, error)
	// Queue starts a run of w with a configuration version (a plan only,
	// for a speculative one).
	Queue func(ctx context.Context, w *Workspace, configID, message string, speculative bool) (string, error)
	// Disconnect removes the vcs-repo of workspaces inside q's
	// transaction (their token is being deleted); DisconnectStacks that
	// of stacks.
	Disconnect       func(ctx context.Context, q store.Q, workspaceIDs []string) error
	DisconnectStacks func(ctx context.Context, q store.Q, stackIDs []string) error
	// Stack reads what a fetch needs of a stack (its working directory
	// and trigger patterns; core.NotFound when it is gone), and
	// ConfigureStack makes a stack configuration of a commit's archive,
	// which the stack then prepares and deploys as any other; record runs
	// in the transaction that makes the configuration, before its runs
	// exist.
	Stack          func(ctx context.Context, id string) (*Workspace, error)
	ConfigureStack func(ctx context.Context, stackID string, archive []byte, speculative bool,
		record func(ctx context.Context, q store.Q, configurationID string) error) (string, error)
	// Modules is the private registry, which VCS-backed modules publish
	// into; PolicySets the policy sets VCS-backed sets version.
	Modules    Modules
	PolicySets PolicySets
	// MaxArchive bounds a commit's archive (the configuration version's
	// upload limit).
	MaxArchive int64
	Logger     *slog.Logger
}

// Origin is where a configuration version made from a commit came from:
// HCP Terraform's ingress attributes (configversion.Ingress, field for
// field).
type Origin struct {
	Branch            string
	CloneURL          string
	CommitMessage     string
	CommitSHA         string
	CommitURL         string
	CompareURL        string
	Identifier        string
	IsPullRequest     bool
	OnDefaultBranch   bool
	PullRequestNumber int
	PullRequestURL    string
	PullRequestTitle  string
	Tag               string
	SenderUsername    string
	SenderHTMLURL     string
}

// RunSource is the source of the runs a push starts (HCP Terraform's).
const RunSource = "tfe-configuration-version"

// ingress is one commit to fetch for a workspace: a push's, the branch
// head when the connection was made (Connect), or a pull request's head
// (PR, for a speculative plan).
type ingress struct {
	// Workspace is the workspace's ID, or the stack's when Stack.
	Workspace, Webhook string
	Stack              bool
	SHA, Branch, Tag   string
	// Before is the branch's commit before a push (for the compare link).
	Before    string
	Message   string
	Sender    string
	Changed   []string
	Truncated bool
	Connect   bool
	// PR, PRTitle and PRURL name a pull request.
	PR             int
	PRTitle, PRURL string
	// Module: Workspace is a registry module's ID; Version is the
	// version to publish (a branch-based module's, from the API or its
	// initial one).
	Module  bool   `json:",omitempty"`
	Version string `json:",omitempty"`
	// Test: a commit of a module publishing from a branch, to test.
	Test bool `json:",omitempty"`
	// PolicySet: Workspace is a policy set's ID.
	PolicySet bool `json:",omitempty"`
}

func ingressMessage(in ingress) outbox.Message {
	p, _ := json.Marshal(in)
	key := "ingress:" + in.Webhook + ":" + in.SHA
	if in.PR > 0 {
		key = fmt.Sprintf("pull:%s:%d:%s", in.Webhook, in.PR, in.SHA)
	}
	if in.Module && in.Version != "" && !in.Connect {
		key = "publish:" + in.Webhook + ":" + in.Version
	}
	if in.Test && in.PR == 0 {
		key = "test:" + in.Webhook + ":" + in.SHA
	}
	if in.Connect {
		key = "connect:" + in.Webhook + ":" + core.RandomString(8)
	}
	return outbox.Message{Key: key, Lane: in.Workspace, Payload: string(p)}
}

// status is a commit status to post for a run.
type status struct {
	Token, Identifier, SHA string
	Status                 vcshost.Status
}

const topic = "vcs"

func (s *Service) newQueue() (*outbox.Queue, error) {
	return outbox.New(outbox.Options{DB: s.db, Topic: topic, Handle: s.handle, Logger: s.logger, MaxAttempts: 8,
		Backoff: time.Second, MaxBackoff: time.Minute, ClaimTTL: 10 * time.Minute, Workers: 2, Poll: time.Second})
}

// Run handles the domain's queue (webhook registrations and removals,
// commits to fetch, commit statuses) until ctx ends: on one replica at a
// time (the server's leader).
func (s *Service) Run(ctx context.Context, claimant, lostPrefix string) {
	s.queue.Run(ctx, claimant, lostPrefix)
}

// Queue is the domain's outbox queue (the server hooks its wake-ups and
// metrics on).
func (s *Service) Queue() *outbox.Queue { return s.queue }

// permanentHost makes a host's refusal of the token or a missing
// repository final: retrying will not change it.
func permanentHost(err error) error {
	if final(err) {
		return outbox.Permanent(err)
	}
	return err
}

// final reports whether a host's answer will not change on a retry: the
// token refused, the repository missing, or a request of ours invalid.
func final(err error) bool {
	return errors.Is(err, vcshost.ErrUnauthorized) || errors.Is(err, vcshost.ErrNotFound) || core.KindOf(err) == core.KindInvalid
}

func (s *Service) handle(ctx context.Context, it outbox.Item) (func(outbox.Outcome), error) {
	kind, _, _ := strings.Cut(it.Key, ":")
	var err error
	switch kind {
	case "hook":
		err = s.registerHook(ctx, it.Payload)
	case "unhook":
		var u unhook
		if err = json.Unmarshal([]byte(it.Payload), &u); err == nil {
			err = s.removeHook(ctx, u)
		}
	case "ingress", "connect", "pull", "publish", "test":
		var in ingress
		if err = json.Unmarshal([]byte(it.Payload), &in); err == nil {
			err = s.fetch(ctx, in)
		}
	case "status":
		var st status
		if err = json.Unmarshal([]byte(it.Payload), &st); err == nil {
			err = s.postStatus(ctx, st)
		}
	default:
		err = outbox.Permanent(fmt.Errorf("vcs: unknown item %q", it.Key))
	}
	if err != nil && ctx.Err() == nil {
		s.logger.Warn("VCS work failed", "item", it.Key, "attempt", it.Attempts, "final", it.Last, "error", err)
	}
	return nil, err
}

func (s *Service) hostFor(ctx context.Context, tokenID string) (*vcshost.Host, error) {
	cred, err := s.Credential(ctx, s.db, tokenID)
	if err != nil {
		return nil, err
	}
	return s.host(cred)
}

// registerHook registers a connection's webhook at the host, once; a
// connection dropped meanwhile has its new hook removed at once. A
// webhook to the connection's URL already at the host was made by an
// earlier attempt that could not record its ID (the server stopped, or
// the host's answer was lost): it is removed first, so that the host
// never delivers a push twice.
func (s *Service) registerHook(ctx context.Context, webhook string) error {
	c, err := s.connByWebhook(ctx, s.db, webhook)
	if err != nil || c == nil || c.hookID != "" {
		return err
	}
	h, err := s.hostFor(ctx, c.token)
	if core.KindOf(err) == core.KindNotFound {
		return nil // the token is gone, and the connection with it
	}
	if err != nil {
		return permanentHost(err)
	}
	url := s.baseURL + WebhookPath + webhook
	lost, err := h.HooksTo(ctx, c.identifier, url)
	if err != nil {
		return permanentHost(err)
	}
	for _, id := range lost {
		if err := h.DeleteHook(ctx, c.identifier, id); err != nil {
			return permanentHost(err)
		}
	}
	id, err := h.CreateHook(ctx, c.identifier, url, c.secret)
	if err != nil {
		return permanentHost(err)
	}
	res, err := s.db.Exec(ctx, `UPDATE `+c.of.table+` SET provider_hook_id = ? WHERE webhook_id = ?`, id, webhook)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return h.DeleteHook(ctx, c.identifier, id)
	}
	return nil
}

func (s *Service) removeHook(ctx context.Context, u unhook) error {
	h, err := s.hostFor(ctx, u.Token)
	if core.KindOf(err) == core.KindNotFound && u.Credential != "" {
		// The token went (with the connection): its sealed credential asks.
		h, err = s.unhookHost(ctx, u.Credential)
	}
	if core.KindOf(err) == core.KindNotFound {
		return nil // the token is gone: the host cannot be asked
	}
	if err != nil {
		return permanentHost(err)
	}
	for _, at := range u.hooks() {
		if err := h.DeleteHook(ctx, at.Identifier, at.Hook); err != nil {
			return permanentHost(err)
		}
	}
	return nil
}

// fetch turns a commit into a configuration version and, for a push (or
// a connection of a workspace that queues all runs), a run.
func (s *Service) fetch(ctx context.Context, in ingress) error {
	of := workspaceOwner
	read := s.ingress.Workspace
	switch {
	case in.Stack:
		of, read = stackOwner, s.ingress.Stack
	case in.Module:
		of = moduleOwner
	case in.PolicySet:
		of = policySetOwner
	}
	c, err := s.loadConn(ctx, s.db, of, of.column+` = ?`, in.Workspace, false)
	if err != nil {
		return err
	}
	if c == nil || c.webhook != in.Webhook {
		return nil // disconnected or reconnected since
	}
	if in.Module {
		return s.fetchModule(ctx, c, in)
	}
	if in.PolicySet {
		return s.fetchPolicySet(ctx, c, in)
	}
	w, err := read(ctx, in.Workspace)
	if core.KindOf(err) == core.KindNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	if in.PR > 0 && !w.SpeculativeEnabled {
		s.logger.Info("pull request not planned: the workspace's speculative plans are off", "workspace", w.ID, "pull", in.PR)
		return nil
	}
	if !in.Connect && in.PR == 0 && !Triggers(w, in.Changed, in.Truncated) {
		s.logger.Info("push changed no file that triggers runs", "workspace", w.ID, "commit", in.SHA)
		return nil
	}
	h, err := s.hostFor(ctx, c.token)
	if err != nil {
		return permanentHost(err)
	}
	if in.Connect {
		head, err := h.Branch(ctx, c.identifier, c.branch)
		if err != nil {
			return permanentHost(err)
		}
		in.SHA, in.Message, in.Branch = head.SHA, head.Message, c.branch
	}
	archive, err := s.archive(ctx, h, c, in.SHA)
	if err != nil {
		return permanentHost(err)
	}
	if in.Stack {
		// A stack's configuration deploys as an uploaded one does (a pull
		// request's only plans). Its deployment runs report to the commit
		// (StackRunStatus): the commit is recorded with the configuration,
		// so it is there when the first run is made (pending).
		_, err := s.ingress.ConfigureStack(ctx, w.ID, archive, in.PR > 0, func(ctx context.Context, q store.Q, cfg string) error {
			_, err := q.Exec(ctx, `INSERT INTO vcs_stack_configurations (configuration_id, stack_id, organization_name, stack_name, oauth_token_id,
				identifier, sha, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, cfg, w.ID, w.Organization, w.Name, c.token, c.identifier, in.SHA,
				core.Micros(core.Now()))
			return err
		})
		return permanentHost(err)
	}
	cv, err := s.ingress.Configure(ctx, w, archive, string(h.Kind), in.PR > 0, s.origin(ctx, h, c, in))
	if err != nil {
		return permanentHost(err)
	}
	if in.Connect && !w.QueueAllRuns {
		return nil
	}
	msg := firstLine(in.Message)
	if msg == "" {
		msg = "Triggered by commit " + shortSHA(in.SHA)
	}
	runID, err := s.ingress.Queue(ctx, w, cv, msg, in.PR > 0)
	if err != nil {
		return permanentHost(err)
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO vcs_runs (run_id, workspace_id, oauth_token_id, identifier, sha, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			runID, w.ID, c.token, c.identifier, in.SHA, core.Micros(core.Now())); err != nil {
			return err
		}
		return s.enqueueStatus(ctx, tx, w, runID, c.token, c.identifier, in.SHA, run.Pending, in.PR > 0)
	})
}

// origin describes where a fetched commit came from (its links are the
// host's web pages, GitHub's and Gitea's alike).
func (s *Service) origin(ctx context.Context, h *vcshost.Host, c *connection, in ingress) Origin {
	repoURL := h.HTTPURL + "/" + c.identifier
	o := Origin{Branch: in.Branch, CloneURL: h.CloneURL(c.identifier), CommitMessage: in.Message, CommitSHA: in.SHA,
		CommitURL: repoURL + "/commit/" + in.SHA, Identifier: c.identifier, Tag: in.Tag, SenderUsername: in.Sender}
	if in.Sender != "" {
		o.SenderHTMLURL = h.HTTPURL + "/" + in.Sender
	}
	if in.Before != "" && in.Before != vcshost.ZeroSHA {
		o.CompareURL = repoURL + "/compare/" + in.Before + "..." + in.SHA
	}
	if in.PR > 0 {
		o.IsPullRequest, o.PullRequestNumber, o.PullRequestTitle, o.PullRequestURL = true, in.PR, in.PRTitle, in.PRURL
	}
	if o.Branch != "" {
		if def, err := h.DefaultBranch(ctx, c.identifier); err == nil {
			o.OnDefaultBranch = def == o.Branch
		}
	}
	return o
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 255 {
		s = s[:255]
	}
	return strings.TrimSpace(s)
}

func shortSHA(sha string) string {
	if len(sha) > 8 {
		return sha[:8]
	}
	return sha
}

// Triggers reports whether a push that changed files starts a run of w,
// as HCP Terraform decides it: always when file triggers are off or the
// changed files are not known in full; otherwise when a file matches one
// of the trigger patterns, or, without patterns, lies in the working
// directory (the whole repository when there is none) or under a
// trigger prefix.
func Triggers(w *Workspace, changed []string, truncated bool) bool {
	if !w.FileTriggersEnabled || truncated {
		return true
	}
	if len(w.TriggerPatterns) > 0 {
		for _, f := range changed {
			for _, p := range w.TriggerPatterns {
				if globMatch(p, f) {
					return true
				}
			}
		}
		return false
	}
	dirs := append([]string{w.WorkingDirectory}, w.TriggerPrefixes...)
	for _, f := range changed {
		for _, d := range dirs {
			d = strings.Trim(d, "/")
			if d == "" || f == d || strings.HasPrefix(f, d+"/") {
				return true
			}
		}
	}
	return false
}

// globMatch matches a path against a glob whose segments are path.Match
// patterns and where ** is any number of segments; a leading / anchors
// nothing more (paths are from the repository's root).
func globMatch(pattern, name string) bool {
	return matchSegments(strings.Split(strings.Trim(pattern, "/"), "/"), strings.Split(name, "/"))
}

func matchSegments(p, n []string) bool {
	for len(p) > 0 {
		if p[0] == "**" {
			for i := 0; i <= len(n); i++ {
				if matchSegments(p[1:], n[i:]) {
					return true
				}
			}
			return false
		}
		if len(n) == 0 {
			return false
		}
		if ok, err := path.Match(p[0], n[0]); err != nil || !ok {
			return false
		}
		p, n = p[1:], n[1:]
	}
	return len(n) == 0
}

// statusOf is the commit status of a run in a status, or ok false for a
// status that reports nothing new.
func statusOf(st run.Status, planOnly bool) (state, description string, ok bool) {
	if planOnly && st == run.PlannedAndFinished {
		return "success", "Speculative plan finished", true
	}
	switch st {
	case run.Pending:
		return "pending", "Run pending", true
	case run.Planning:
		return "pending", "Planning", true
	case run.Planned:
		return "pending", "Planned: waiting for confirmation", true
	case run.PlannedAndFinished:
		return "success", "Planned: no changes to apply", true
	case run.Applying:
		return "pending", "Applying", true
	case run.Applied:
		return "success", "Applied", true
	case run.Errored:
		return "failure", "Run errored", true
	case run.Canceled, run.ForceCanceled:
		return "error", "Run canceled", true
	case run.Discarded:
		return "error", "Run discarded", true
	}
	return "", "", false
}

func (s *Service) enqueueStatus(ctx context.Context, q store.Q, w *Workspace, runID, token, identifier, sha string, st run.Status, planOnly bool) error {
	state, desc, ok := statusOf(st, planOnly)
	if !ok {
		return nil
	}
	return s.queueStatus(ctx, q, runID, string(st), false, status{Token: token, Identifier: identifier, SHA: sha, Status: vcshost.Status{State: state, Description: desc,
		Context: "Terrace/" + w.Organization + "/" + w.Name, TargetURL: s.baseURL + "/app/" + w.Organization + "/workspaces/" + w.Name + "/runs/" + runID}})
}

// queueStatus queues, in q's transaction, the commit status st of a run
// (of a workspace, a stack's deployment or a module's tests) in its
// status runStatus. A run's statuses share one lane of the queue, which
// handles them one at a time and oldest first; with forget, a status of
// the run not yet posted is dropped first, so that one retried after a
// failure never posts an older status over a newer one.
func (s *Service) queueStatus(ctx context.Context, q store.Q, runID, runStatus string, forget bool, st status) error {
	p, _ := json.Marshal(st)
	lane := "status:" + runID
	if forget {
		if err := s.queue.ForgetLane(ctx, q, lane); err != nil {
			return err
		}
	}
	return s.enqueue(ctx, q, outbox.Message{Key: lane + ":" + runStatus, Lane: lane, Payload: string(p)})
}

func (s *Service) postStatus(ctx context.Context, st status) error {
	h, err := s.hostFor(ctx, st.Token)
	if core.KindOf(err) == core.KindNotFound {
		return nil
	}
	if err != nil {
		return permanentHost(err)
	}
	return permanentHost(h.SetStatus(ctx, st.Identifier, st.SHA, st.Status))
}

// StackRun is a stack's deployment run in a new status, as
// StackRunStatus hears it.
type StackRun struct {
	ID, ConfigurationID, Deployment string
	Status                          stack.RunStatus
	Speculative                     bool
}

// stackStatusOf is the commit status of a deployment run in a status, or
// ok false for a status that says nothing new.
func stackStatusOf(st stack.RunStatus, speculative bool) (state, description string, ok bool) {
	switch st {
	case stack.RunPending:
		// The loop begins a run at once: its plan is next.
		return "pending", "Planning", true
	case stack.RunPreDeploying:
		return "", "", false // the plan that pending announced
	case stack.RunPreDeployingPendingOperator, stack.RunDeployingPendingOperator:
		return "pending", "Waiting for approval", true
	case stack.RunAcquiringLock:
		return "pending", "Approved: waiting for the deployment's lock", true
	case stack.RunDeploying:
		return "pending", "Deploying", true
	case stack.RunSucceeded:
		if speculative {
			return "success", "Speculative plan finished", true
		}
		return "success", "Deployed", true
	case stack.RunFailed:
		return "failure", "Deployment failed", true
	case stack.RunAbandoned:
		// error, not failure, as a workspace run canceled or discarded
		// (statusOf): failure says the deployment itself failed, while
		// an abandoned run was stopped before its end (canceled, or its
		// plan dismissed by a newer configuration's approval) and says
		// nothing of the commit's code.
		return "error", "Deployment abandoned", true
	}
	return "", "", false
}

// StackRunStatus runs inside the transaction that gives a deployment run
// a status (made pending, waiting for approval, approved, deploying,
// ended): a run of a configuration made of a commit reports it to the
// commit, one status per deployment (context
// Terrace/<org>/<stack>/<deployment>). A status not yet posted when the
// next comes is dropped (queueStatus), so that a pending never posts over
// the run's end.
func (s *Service) StackRunStatus(ctx context.Context, q store.Q, r StackRun) error {
	state, desc, ok := stackStatusOf(r.Status, r.Speculative)
	if !ok {
		return nil
	}
	var org, name, token, identifier, sha string
	err := q.QueryRow(ctx, `SELECT organization_name, stack_name, oauth_token_id, identifier, sha FROM vcs_stack_configurations WHERE configuration_id = ?`,
		r.ConfigurationID).Scan(&org, &name, &token, &identifier, &sha)
	if store.IsNoRows(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.queueStatus(ctx, q, r.ID, string(r.Status), true, status{Token: token, Identifier: identifier, SHA: sha, Status: vcshost.Status{
		State: state, Description: desc, Context: "Terrace/" + org + "/" + name + "/" + r.Deployment, TargetURL: s.baseURL + "/app/" + org + "/stack-runs/" + r.ID}})
}

// RunTransition reports a VCS run's new status to its commit.
func (s *Service) RunTransition(ctx context.Context, t run.Transition) {
	if t.Run.Source != RunSource || t.From == "" {
		return
	}
	if _, _, ok := statusOf(t.To, t.Run.PlanOnly); !ok {
		return
	}
	var token, identifier, sha string
	err := s.db.QueryRow(ctx, `SELECT oauth_token_id, identifier, sha FROM vcs_runs WHERE run_id = ?`, t.Run.ID).Scan(&token, &identifier, &sha)
	if store.IsNoRows(err) {
		return
	}
	if err == nil {
		w := &Workspace{ID: t.Run.WorkspaceID, Organization: t.Workspace.Organization, Name: t.Workspace.Name}
		err = s.enqueueStatus(ctx, s.db, w, t.Run.ID, token, identifier, sha, t.To, t.Run.PlanOnly)
	}
	if err != nil {
		s.logger.Error("queueing a commit status", "run", t.Run.ID, "error", err)
	}
}
