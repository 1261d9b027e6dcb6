package jobapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/forward"
)

// Request forwarding (internal/forward): an agent takes the requests its
// pool's run tasks send, sends them from its own network, and reports the
// service's answer. Only agents take them: the server's own runner
// reaches what the server reaches.

// ForwardClaim is the answer to a claim: nil when no request came.
type ForwardClaim struct {
	Request *forward.Request `json:"request"`
}

func (s *Server) registerForwards(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/agent/forwards/claim", s.handle(s.claimForward))
	mux.HandleFunc("POST /api/agent/forwards/{id}/result", s.handle(s.reportForward))
}

// forwardingAgent is the agent (and its pool) calling.
func (s *Server) forwardingAgent(r *http.Request) (pool, agent string, err error) {
	if s.o.Forwards == nil {
		return "", "", core.NotFound("this server forwards no requests")
	}
	if p := auth.FromContext(r.Context()); p == nil || p.Kind != auth.KindAgent {
		return "", "", core.Forbidden("only agents forward requests")
	}
	if pool, err = poolOf(r.Context()); err != nil {
		return "", "", err
	}
	agent, err = s.runnerOf(r)
	return pool, agent, err
}

func (s *Server) claimForward(w http.ResponseWriter, r *http.Request) error {
	pool, agent, err := s.forwardingAgent(r)
	if err != nil {
		return err
	}
	var req ClaimRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.wait(req.WaitMS))
	defer cancel()
	fr, err := s.o.Forwards.Claim(ctx, pool, agent)
	if err != nil {
		return err
	}
	respond(w, http.StatusOK, ForwardClaim{Request: fr})
	return nil
}

func (s *Server) reportForward(w http.ResponseWriter, r *http.Request) error {
	pool, agent, err := s.forwardingAgent(r)
	if err != nil {
		return err
	}
	var res forward.Result
	if err := decode(r, &res); err != nil {
		return err
	}
	if err := s.o.Forwards.Report(r.Context(), pool, agent, r.PathValue("id"), res); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// ClaimForward waits a while for a request to forward; nil when none came.
func (c *Client) ClaimForward(ctx context.Context) (*forward.Request, error) {
	var out ForwardClaim
	_, err := c.call(ctx, http.MethodPost, "/api/agent/forwards/claim", ClaimRequest{WaitMS: c.ClaimWait.Milliseconds()}, &out)
	return out.Request, err
}

// ReportForward reports the answer to a forwarded request.
func (c *Client) ReportForward(ctx context.Context, id string, res forward.Result) error {
	_, err := c.call(ctx, http.MethodPost, "/api/agent/forwards/"+id+"/result", res, nil)
	return err
}

// forwardLoop takes the pool's forwarded requests until ctx ends, sending
// each with send (the agent's own HTTP client: its network, its proxy).
func forwardLoop(ctx context.Context, c *Client, send *http.Client, log *slog.Logger) {
	for ctx.Err() == nil {
		fr, err := c.ClaimForward(ctx)
		var apiErr *Error
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
			log.Info("the server forwards no requests; not asking again")
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("asking for requests to forward", "error", err)
				sleep(ctx, 2*time.Second)
			}
			continue
		}
		if fr == nil {
			continue
		}
		go func() {
			res := sendForward(ctx, send, fr)
			log.Info("forwarded a request", "id", fr.ID, "url", shownURL(fr.URL), "status", res.Status, "error", res.Error)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := c.ReportForward(rctx, fr.ID, res); err != nil {
				log.Warn("reporting a forwarded request's answer", "id", fr.ID, "error", err)
			}
		}()
	}
}

// maxForwardAnswer bounds what is read of a service's answer (only its
// status is reported).
const maxForwardAnswer = 64 << 10

func sendForward(ctx context.Context, send *http.Client, fr *forward.Request) forward.Result {
	if fr.Timeout <= 0 {
		return forward.Result{Error: "the request's time ran out before it was sent"}
	}
	ctx, cancel := context.WithTimeout(ctx, fr.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fr.URL, bytes.NewReader(fr.Body))
	if err != nil {
		return forward.Result{Error: fmt.Sprintf("invalid URL %q", shownURL(fr.URL))}
	}
	for k, v := range fr.Header {
		req.Header.Set(k, v)
	}
	res, err := send.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return forward.Result{Error: fmt.Sprintf("%s %s: %v", ue.Op, shownURL(ue.URL), ue.Err)}
		}
		return forward.Result{Error: err.Error()}
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxForwardAnswer))
	return forward.Result{Status: res.StatusCode}
}

// shownURL is a service's URL as the agent's log and its reports show
// it: without user information or query, where a service may keep a
// credential.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
