// Package tfeapi is the HTTP edge shared by every domain's api.go: JSON:API
// responses encoded with hashicorp/jsonapi (the library go-tfe decodes with),
// lenient request decoding (clients send empty types, plain-JSON action
// bodies and full objects inside relationships), pagination, includes, and
// the single mapping from core error kinds to HTTP statuses.
package tfeapi
