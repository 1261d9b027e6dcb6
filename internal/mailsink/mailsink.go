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

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Message is one accepted message.
type Message struct {
	From string
	To   []string
	Data []byte // the whole message: headers and body
	// Auth is the mechanism the sender authenticated with ("" for none:
	// a sink started by Start).
	Auth string
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
	// username and password, when set, are the credentials a sender must
	// authenticate with (StartWithAuth).
	username, password string
}

// Start listens on a free loopback port and takes every message.
func Start() (*Sink, error) { return start("", "") }

// StartWithAuth is Start for a server that takes messages only from a
// sender authenticated with username and password, by PLAIN or LOGIN
// (offered without TLS: it listens on loopback only).
func StartWithAuth(username, password string) (*Sink, error) {
	if username == "" {
		return nil, errors.New("mailsink: a user name is required")
	}
	return start(username, password)
}

func start(username, password string) (*Sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Sink{Addr: ln.Addr().String(), Messages: make(chan Message, 100), username: username, password: password}
	s.srv = smtp.NewServer(backend{s})
	s.srv.AllowInsecureAuth = true
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
	// auth is the mechanism the session authenticated with.
	auth string
}

func (x *session) Reset()        { x.msg = Message{} }
func (x *session) Logout() error { return nil }

// errAuthRequired refuses MAIL before authentication (RFC 4954).
var errAuthRequired = &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "Authentication required"}

// errBadCredentials refuses AUTH with other credentials.
var errBadCredentials = &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "Authentication credentials invalid"}

func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	if x.s.username != "" && x.auth == "" {
		return errAuthRequired
	}
	x.msg.From = from
	return nil
}

// AuthMechanisms offers PLAIN and LOGIN when the sink takes credentials
// (none otherwise: the server then offers no AUTH).
func (x *session) AuthMechanisms() []string {
	if x.s.username == "" {
		return nil
	}
	return []string{sasl.Plain, sasl.Login}
}

func (x *session) Auth(mech string) (sasl.Server, error) {
	check := func(username, password string) error {
		if username != x.s.username || password != x.s.password {
			return errBadCredentials
		}
		x.auth = mech
		return nil
	}
	switch {
	case x.s.username == "":
		return nil, smtp.ErrAuthUnsupported
	case mech == sasl.Plain:
		return sasl.NewPlainServer(func(_, username, password string) error { return check(username, password) }), nil
	case mech == sasl.Login:
		return &loginServer{check: check}, nil
	}
	return nil, smtp.ErrAuthUnknownMechanism
}

// loginServer is the server side of LOGIN: it asks for the user name,
// then the password.
type loginServer struct {
	check    func(username, password string) error
	username string
	step     int
}

func (l *loginServer) Next(response []byte) ([]byte, bool, error) {
	switch l.step {
	case 0:
		l.step++
		if response != nil { // the user name as an initial response
			l.username = string(response)
			l.step++
			return []byte("Password:"), false, nil
		}
		return []byte("Username:"), false, nil
	case 1:
		l.username = string(response)
		l.step++
		return []byte("Password:"), false, nil
	case 2:
		l.step++
		return nil, true, l.check(l.username, string(response))
	}
	return nil, false, sasl.ErrUnexpectedClientResponse
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
	m := Message{From: x.msg.From, To: x.msg.To, Data: b, Auth: x.auth}
	x.s.mu.Lock()
	x.s.all = append(x.s.all, m)
	x.s.mu.Unlock()
	select {
	case x.s.Messages <- m:
	default:
	}
	return nil
}
