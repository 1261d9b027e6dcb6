package httplimit

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies are the reverse proxies (load balancers) trusted to say who
// their client was in X-Forwarded-For. A request that comes straight from
// anyone else is keyed by its own address, whatever it claims.
type Proxies []netip.Prefix

// ParseProxies reads CIDRs (or single addresses), as given to
// --trusted-proxies.
func ParseProxies(list []string) (Proxies, error) {
	var p Proxies
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q is neither an IP address nor a CIDR", s)
			}
			p = append(p, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		pre, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q is not a CIDR: %w", s, err)
		}
		if pre.Addr().Is4In6() {
			pre = netip.PrefixFrom(pre.Addr().Unmap(), pre.Bits()-96)
		}
		p = append(p, pre.Masked())
	}
	return p, nil
}

func (p Proxies) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, pre := range p {
		if pre.Contains(a) {
			return true
		}
	}
	return false
}

// Address is the client's IP address, a key for per-address limits. The
// direct peer is the client unless it is a trusted proxy; then
// X-Forwarded-For is read from its right end (the entry the nearest proxy
// added) leftwards past every trusted proxy, and the first address that
// is not one is the client. Entries left of it were written by the client
// itself and are ignored, so a client cannot choose its own bucket; an
// entry that is not an IP address stops the walk at the last good hop.
func (p Proxies) Address(r *http.Request) string {
	peer := Address(r)
	if len(p) == 0 {
		return peer
	}
	addr, err := netip.ParseAddr(peer)
	if err != nil || !p.trusts(addr) {
		return peer
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	client := addr
	for i := len(hops) - 1; i >= 0; i-- {
		h := strings.TrimSpace(hops[i])
		a, err := netip.ParseAddr(h)
		if err != nil {
			// An "ip:port" entry, as some proxies write it.
			host, _, serr := net.SplitHostPort(h)
			if serr != nil {
				break
			}
			if a, err = netip.ParseAddr(host); err != nil {
				break
			}
		}
		client = a.Unmap()
		if !p.trusts(client) {
			break
		}
	}
	return client.String()
}
