// Package mailsink is a real SMTP server (github.com/emersion/go-smtp) on a
// loopback port that keeps every message it accepts, for tests and the
// conformance harness: Terrace's email notifications are sent to it over
// SMTP exactly as to a production mail server.
package mailsink

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// Message is one accepted message.
type Message struct {
	From string
	To   []string
	Data []byte // the whole message: headers and body
}

// Sink is a running SMTP server.
type Sink struct {
	// Addr is host:port to give Terrace as --smtp-addr.
	Addr string
	// Messages receives each accepted message (buffered; a full buffer
	// drops the notification, never the message: see All).
	Messages chan Message
	srv      *smtp.Server
	mu       sync.Mutex
	all      []Message
}

// Start listens on a free loopback port.
func Start() (*Sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Sink{Addr: ln.Addr().String(), Messages: make(chan Message, 100)}
	s.srv = smtp.NewServer(backend{s})
	s.srv.Domain = "localhost"
	s.srv.ReadTimeout, s.srv.WriteTimeout = 30*time.Second, 30*time.Second
	s.srv.MaxMessageBytes = 1 << 20
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server.
func (s *Sink) Close() error { return s.srv.Close() }

// All returns every message accepted so far.
func (s *Sink) All() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.all...)
}

type backend struct{ s *Sink }

func (b backend) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{s: b.s}, nil }

type session struct {
	s   *Sink
	msg Message
}

func (x *session) Reset()        { x.msg = Message{} }
func (x *session) Logout() error { return nil }

func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	x.msg.From = from
	return nil
}

func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	x.msg.To = append(x.msg.To, to)
	return nil
}

func (x *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if len(x.msg.To) == 0 {
		return errors.New("no recipients")
	}
	m := Message{From: x.msg.From, To: x.msg.To, Data: b}
	x.s.mu.Lock()
	x.s.all = append(x.s.all, m)
	x.s.mu.Unlock()
	select {
	case x.s.Messages <- m:
	default:
	}
	return nil
}
