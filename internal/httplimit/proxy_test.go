package httplimit

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestProxiesAddress(t *testing.T) {
	t.Parallel()
	p, err := ParseProxies([]string{"10.0.0.0/8", " 192.0.2.7 ", "::ffff:198.51.100.0/120", "2001:db8::/32"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, remote string
		xff          []string
		want         string
	}{
		{"direct client, no header", "203.0.113.5:4000", nil, "203.0.113.5"},
		{"direct client lying", "203.0.113.5:4000", []string{"1.2.3.4"}, "203.0.113.5"},
		{"trusted proxy, one hop", "10.1.2.3:5000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"client forged a left entry", "10.1.2.3:5000", []string{"1.1.1.1, 203.0.113.9"}, "203.0.113.9"},
		{"two trusted proxies", "10.1.2.3:5000", []string{"203.0.113.9, 192.0.2.7"}, "203.0.113.9"},
		{"header split over two lines", "10.1.2.3:5000", []string{"1.1.1.1", "203.0.113.9, 10.9.9.9"}, "203.0.113.9"},
		{"single trusted address", "192.0.2.7:1", []string{"203.0.113.10"}, "203.0.113.10"},
		{"mapped CIDR", "198.51.100.20:1", []string{"203.0.113.11"}, "203.0.113.11"},
		{"ipv6 proxy", "[2001:db8::1]:443", []string{"2001:db8:ffff::1, 2001:db8::2"}, "2001:db8:ffff::1"},
		{"ipv6 proxy, v6 client", "[2001:db8::1]:443", []string{"2600::1"}, "2600::1"},
		{"ip:port entry", "10.1.2.3:5000", []string{"203.0.113.12:6000"}, "203.0.113.12"},
		{"garbage stops at the last good hop", "10.1.2.3:5000", []string{"203.0.113.9, nonsense, 10.2.2.2"}, "10.2.2.2"},
		{"trusted proxy with no header", "10.1.2.3:5000", nil, "10.1.2.3"},
		{"every hop trusted", "10.1.2.3:5000", []string{"10.4.4.4, 10.5.5.5"}, "10.4.4.4"},
	}
	for _, c := range cases {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = c.remote
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := p.Address(r); got != c.want {
			t.Errorf("%s: Address = %q, want %q", c.name, got, c.want)
		}
	}
	// With no proxies configured the header is never read.
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.1.2.3:5000"
	r.Header.Set("X-Forwarded-For", "203.0.113.9")
	if got := Proxies(nil).Address(r); got != "10.1.2.3" {
		t.Errorf("no proxies: Address = %q, want the peer 10.1.2.3", got)
	}
}

func TestParseProxiesRejectsGarbage(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"10.0.0.0/33", "not-an-ip", "10.0.0/8"} {
		if _, err := ParseProxies([]string{bad}); err == nil {
			t.Errorf("ParseProxies(%q) accepted it", bad)
		}
	}
}
