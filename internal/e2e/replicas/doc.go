// Package replicas holds the cluster acceptance test of issue 14
// (TestReplicasSurviveKill): two `terrace server` replicas on PostgreSQL
// and versitygw with two `terrace agent`s, one replica killed halfway. It
// is a package of its own so that `go test ./...` runs it beside the
// other end-to-end tests (internal/e2e) instead of after them.
package replicas
