package ui

import "net/http"

// record puts a page's action in the audit trail as the API request
// apiPattern (with path parameters kv, name then value) would be:
// same resource type, ID and action, marked as done through the UI, with
// status, the code that request answers with. org names the organization
// when the API route does not.
func (u *UI) record(r *http.Request, org, apiPattern string, status int, createdID string, kv ...string) {
	if u.o.Audit == nil {
		return
	}
	values := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		values[kv[i]] = kv[i+1]
	}
	u.o.Audit.RecordPage(r, org, apiPattern, status, values, createdID)
}
