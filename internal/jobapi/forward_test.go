package jobapi

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/forward"
)

// TestForwardReportsNoCredentials: a service URL's user information and
// query (where a service may keep a credential) appear neither in what the
// agent logs nor in the error it reports for a request it could not send.
func TestForwardReportsNoCredentials(t *testing.T) {
	if got := shownURL("https://user:pw@tasks.example:8443/hook/run?token=s3cret#frag"); got != "https://tasks.example:8443/hook/run" {
		t.Errorf("shownURL = %q", got)
	}
	if got := shownURL("http://[::1"); strings.Contains(got, "::1") {
		t.Errorf("shownURL of an unparsable URL = %q", got)
	}
	// A port nothing listens on: the request fails to connect.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	res := sendForward(context.Background(), &http.Client{}, &forward.Request{ID: "f", URL: "http://agent:pw@" + addr + "/task?token=s3cret", Timeout: 5 * time.Second})
	if res.Error == "" || res.Status != 0 {
		t.Fatalf("a request to a closed port: %+v", res)
	}
	if strings.Contains(res.Error, "s3cret") || strings.Contains(res.Error, "pw@") || !strings.Contains(res.Error, addr+"/task") {
		t.Errorf("the reported error %q shows a credential or not the address", res.Error)
	}
}
