// Package localserver starts a Terrace server on 127.0.0.1 for the
// measuring tools (tools/bench, tools/load): a real listener, real TLS,
// and an HTTP transport that trusts the server's CA.
package localserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/terracehq/terrace/internal/server"
)

// Server is a running server and a transport for its clients.
type Server struct {
	*server.Server
	// Transport trusts the server's CA; callers may tune it (idle
	// connections) before they make clients.
	Transport *http.Transport
	stop      func()
}

// Start builds a server from cfg (Addr and Hostname are chosen here) and
// serves it until Close.
func Start(ctx context.Context, cfg server.Config) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	cfg.Addr, cfg.Hostname = ln.Addr().String(), "localhost:"+port
	srv, err := server.New(ctx, cfg)
	if err != nil {
		ln.Close()
		return nil, err
	}
	pem, err := os.ReadFile(srv.CAFile)
	if err != nil {
		srv.Close()
		ln.Close()
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		srv.Close()
		ln.Close()
		return nil, fmt.Errorf("no certificate in %s", srv.CAFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	ctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	return &Server{Server: srv, Transport: tr, stop: func() { cancel(); <-served; srv.Close() }}, nil
}

// Close stops serving and closes the server.
func (s *Server) Close() { s.stop() }
