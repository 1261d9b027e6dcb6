package tfeapi

import (
	"net/http"
	"strconv"
)

// RespondBytes writes a JSON:API document already encoded, as Respond
// writes its own: for a hot response whose domain encodes it directly
// (the workspace read) and holds its bytes to Respond's in a test.
func RespondBytes(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
