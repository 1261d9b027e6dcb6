package testenv

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// RequestStatements returns the store statements that the requests the
// server answered while do ran cost: the sum of
// terrace_http_request_statements over every route, read once no request
// is in flight before and after do. Unlike the store's total
// (DB.Queries), it holds none of the statements of the server's
// background loops, so one request's cost reads exactly, whatever those
// loops are doing. Every client's requests count, so nothing else may
// call the server meanwhile (an agent polling it would count), and do
// must not leave a request open (a log followed as it grows).
func (e *Env) RequestStatements(t testing.TB, do func()) int64 {
	t.Helper()
	before := e.servedStatements(t)
	do()
	return e.servedStatements(t) - before
}

// servedStatements waits until no request is in flight and returns the
// statements the requests answered so far ran.
func (e *Env) servedStatements(t testing.TB) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fams, err := e.Server.Metrics.Registry().Gather()
		if err != nil {
			t.Fatalf("gathering the server's metrics: %v", err)
		}
		sum, inFlight := 0.0, -1.0
		for _, f := range fams {
			switch f.GetName() {
			case "terrace_http_request_statements":
				for _, m := range f.GetMetric() {
					sum += m.GetHistogram().GetSampleSum()
				}
			case "terrace_http_requests_in_flight":
				inFlight = gauge(f.GetMetric())
			}
		}
		switch {
		case inFlight == 0:
			return int64(sum)
		case inFlight < 0:
			t.Fatal("the server's metrics have no terrace_http_requests_in_flight gauge to tell when its requests are answered")
		}
		if time.Now().After(deadline) {
			t.Fatalf("counting the statements of requests: %v requests still in flight after 10s (terrace_http_requests_in_flight)", inFlight)
		}
		time.Sleep(time.Millisecond)
	}
}

func gauge(ms []*dto.Metric) float64 {
	if len(ms) != 1 {
		return -1
	}
	return ms[0].GetGauge().GetValue()
}
