package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Receiver is a real local HTTP endpoint for the go-tfe tests that need a
// URL answering 200 (TFC_RUN_TASK_URL, as go-tfe's own CI sets it):
// notification configurations are verified against it.
type Receiver struct {
	URL      string
	Requests atomic.Int64
	srv      *http.Server
}

// startReceiver listens on a free loopback port until ctx ends.
func startReceiver(ctx context.Context) (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Receiver{URL: "http://" + ln.Addr().String() + "/hook"}
	r.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20))
		r.Requests.Add(1)
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = r.srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = r.srv.Close() }()
	return r, nil
}
