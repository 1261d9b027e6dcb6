package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"time"
)

// ipRanges answers GET /api/meta/ip-ranges (HCP Terraform's IP ranges
// API, go-tfe's Meta.IPRanges): the addresses clients reach Terrace from
// (api) and those Terrace's own connections come from (notifications and
// run task requests, VCS hosts, policies), as the operator declared them
// (--api-cidrs, --egress-cidrs), for the firewalls that must let them
// through. Nothing declared is an empty list. No token is needed, as in
// HCP Terraform.
type ipRanges struct {
	body     []byte
	modified time.Time // the declarations are the process's: its start
}

// parseCIDRs reads CIDR blocks or single addresses (a /32 or /128),
// written as the API shows them: the network's address (10.1.2.0/24).
func parseCIDRs(flag string, in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for _, s := range in {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("--%s: %q is neither a CIDR block (10.0.0.0/24) nor an IP address", flag, s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked().String())
	}
	return out, nil
}

func newIPRanges(api, egress []string, at time.Time) (*ipRanges, error) {
	a, err := parseCIDRs("api-cidrs", api)
	if err != nil {
		return nil, err
	}
	e, err := parseCIDRs("egress-cidrs", egress)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(map[string][]string{"api": a, "notifications": e, "sentinel": e, "vcs": e})
	if err != nil {
		return nil, err
	}
	return &ipRanges{body: body, modified: at.UTC().Truncate(time.Second)}, nil
}

// ServeHTTP answers with the ranges, or 304 Not Modified to a client
// whose If-Modified-Since is not before they were declared.
func (x *ipRanges) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Last-Modified", x.modified.Format(http.TimeFormat))
	if ims, err := http.ParseTime(r.Header.Get("If-Modified-Since")); err == nil && !x.modified.After(ims) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(x.body)
}
