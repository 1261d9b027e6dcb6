package ui

import (
	"bytes"
	"strings"
	"testing"
)

// The getting-started page names the server's CA file when the server
// generated its own CA, and no file (.terrace/tls/ca.pem is wrong with
// --data-dir or --tls-cert) otherwise.
func TestGettingStartedCAFile(t *testing.T) {
	tpl, err := parsePage(templateFS, "templates/gettingstarted.html")
	if err != nil {
		t.Fatal(err)
	}
	render := func(ca string) string {
		var b bytes.Buffer
		data := map[string]any{"Org": map[string]string{"Name": "acme"}, "Hostname": "tf.example", "CAFile": ca, "CloudBlock": "terraform {}"}
		if err := tpl.Execute(&b, page{Title: "Getting started", Org: "acme", Data: data}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if got := render("/srv/terrace/tls/ca.pem"); !strings.Contains(got, "<code>/srv/terrace/tls/ca.pem</code>") {
		t.Errorf("with a generated CA the page does not name its file:\n%s", got)
	}
	if got := render(""); strings.Contains(got, ".terrace/tls") || !strings.Contains(got, `id="ca-file"`) {
		t.Errorf("with the server's own certificate the page names a CA file:\n%s", got)
	}
}
