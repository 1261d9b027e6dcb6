package stackgrow

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"unsafe"
)

// moves reports, in a new goroutine, whether its stack moved during
// before(), and then during a descent using half of Size.
func moves(before func()) (grown, movedAfter bool) {
	done := make(chan [2]bool)
	go func() {
		var x byte
		at := func() uintptr { return uintptr(unsafe.Pointer(&x)) }
		a := at()
		before()
		b := at()
		descend(Size / 2 / 256)
		done <- [2]bool{a != b, at() != b}
	}()
	r := <-done
	return r[0], r[1]
}

// descend uses about n×256 bytes of stack.
//
//go:noinline
func descend(n int) byte {
	var pad [256]byte
	pad[n%256] = byte(n)
	if n == 0 {
		return pad[0]
	}
	return descend(n-1) + pad[n%256]
}

func TestGrowGrowsOnceUpFront(t *testing.T) {
	grown, movedAfter := moves(Grow)
	if !grown {
		t.Error("Grow did not grow a new goroutine's stack")
	}
	if movedAfter {
		t.Error("the stack grew again within Size after Grow")
	}
	// The descent itself does move a new goroutine's stack: the check
	// above can fail.
	if _, moved := moves(func() {}); !moved {
		t.Error("a descent of Size/2 did not grow a new goroutine's stack; the test measures nothing")
	}
}

func TestHandlerServesTheRequest(t *testing.T) {
	calls := 0
	h := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("X-Path", r.URL.Path)
		w.WriteHeader(http.StatusTeapot)
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v2/ping", nil))
	if calls != 1 || rec.Code != http.StatusTeapot || rec.Header().Get("X-Path") != "/api/v2/ping" {
		t.Errorf("next called %d times, answered %d with X-Path %q", calls, rec.Code, rec.Header().Get("X-Path"))
	}
}

// BenchmarkRequest is a request's goroutine that descends 48 frames of
// 256 bytes, grown up front or where it runs out.
func BenchmarkRequest(b *testing.B) {
	for _, c := range []struct {
		name string
		grow bool
	}{{"grown-at-the-deepest", false}, {"grown-up-front", true}} {
		b.Run(c.name, func(b *testing.B) {
			done := make(chan struct{})
			for b.Loop() {
				go func() {
					if c.grow {
						Grow()
					}
					descend(48)
					done <- struct{}{}
				}()
				<-done
			}
		})
	}
}
