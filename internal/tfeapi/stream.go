package tfeapi

import (
	"io"
	"net/http"
	"strconv"
)

// Stream answers a download with the size bytes of rc as contentType
// (the headers alone for HEAD), and closes rc. Headers set on w before,
// such as Cache-Control, go along.
func Stream(w http.ResponseWriter, r *http.Request, contentType string, rc io.ReadCloser, size int64) {
	defer rc.Close()
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = io.Copy(w, rc)
	}
}
