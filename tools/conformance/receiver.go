package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terracehq/terrace/internal/runtask"
)

// Receiver is a real local HTTP endpoint for the go-tfe tests that need a
// URL answering 200 (TFC_RUN_TASK_URL, as go-tfe's own CI sets it). It is
// a run task service: it checks the X-TFC-Task-Signature of every run
// task request (the tests' tasks have no HMAC key, so the signature must
// be the empty string), answers 200, and then reports "passed" on the
// request's callback URL with its access token, as go-tfe's CI mock does.
// Notification configurations are verified against it too.
type Receiver struct {
	URL       string
	Requests  atomic.Int64
	Callbacks atomic.Int64
	srv       *http.Server
	client    *http.Client
	logf      func(string, ...any)
	wg        sync.WaitGroup
}

// startReceiver listens on a free loopback port until ctx ends. caFile
// is the Terrace CA the callbacks must trust.
func startReceiver(ctx context.Context, caFile string, logf func(string, ...any)) (*Receiver, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the Terrace CA for run task callbacks: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no certificate", caFile)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Receiver{URL: "http://" + ln.Addr().String() + "/hook", logf: logf,
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}}
	r.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(r.serve)}
	go func() { _ = r.srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = r.srv.Close(); r.wg.Wait() }()
	return r, nil
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	r.Requests.Add(1)
	var p runtask.Payload
	if json.Unmarshal(body, &p) != nil || p.TaskResultCallbackURL == "" {
		w.WriteHeader(http.StatusOK) // a notification
		return
	}
	if sig := req.Header.Get("X-TFC-Task-Signature"); sig != runtask.Sign("", body) {
		http.Error(w, "X-TFC-Task-Signature does not match the body (the tests' tasks have no HMAC key)", http.StatusUnauthorized)
		return
	}
	w.WriteHeader(http.StatusOK)
	if p.AccessToken == runtask.TestToken {
		return // the verification request of a new task
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := r.pass(p); err != nil {
			r.logf("run task receiver: reporting %s: %v", p.TaskResultID, err)
		}
	}()
}

// pass reports the result passed on its callback.
func (r *Receiver) pass(p runtask.Payload) error {
	cb := []byte(`{"data":{"type":"task-results","attributes":{"status":"passed","message":"checked by the conformance harness"}}}`)
	req, err := http.NewRequest(http.MethodPatch, p.TaskResultCallbackURL, bytes.NewReader(cb))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/vnd.api+json")
	req.Header.Set("Authorization", "Bearer "+p.AccessToken)
	res, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
		return fmt.Errorf("callback answered %d: %s", res.StatusCode, b)
	}
	r.Callbacks.Add(1)
	return nil
}
