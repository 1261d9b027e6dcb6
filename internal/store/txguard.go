package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// ErrConnInTx is the mistake the transaction guard reports: code running
// inside DB.Tx asked the DB itself (not the Tx) for a query, a nested
// transaction or a notification. That takes a second pooled connection
// while the transaction holds the first; with enough of them at once every
// connection of the pool waits on another and the server deadlocks (on
// SQLite a write through the DB inside Tx waits forever on the one writer
// connection). Read what the transaction needs before it starts and pass
// it in, or read it through the Tx.
var ErrConnInTx = errors.New("store: query on the DB inside one of its own transactions (use the Tx, or read before the transaction)")

// TxGuardEnv names the environment variable that turns the guard on for
// the DBs opened afterwards ("1"): a debug option for tests and servers
// (tests that start servers as processes pass it on in the environment).
// `make test` (and so CI) turns it on; servers run without it.
const TxGuardEnv = "TERRACE_STORE_TXGUARD"

func txGuardOn() bool { return os.Getenv(TxGuardEnv) == "1" }

// txGuard remembers which goroutines hold an open transaction of one DB.
//
// The goroutine is the key, not the context: fn of DB.Tx does not receive a
// context, and contexts are shared between goroutines (one goroutine's
// transaction must not fail another's query made with the same context),
// whereas a goroutine blocked on a second connection while it holds the
// first is exactly the mistake. Work that fn hands to other goroutines is
// not seen.
//
// The cost is paid only with the guard on: one stack read per transaction,
// and one per DB query while any transaction of the DB is open.
type txGuard struct {
	open atomic.Int64 // transactions open, to skip the lookup when none is
	mu   sync.Mutex
	by   map[uint64]int // goroutine id → transactions it holds
}

// enter records that the calling goroutine opens a transaction; it fails if
// the goroutine already holds one (a nested DB.Tx). leave undoes it.
func (g *txGuard) enter(what string) (leave func(), err error) {
	id := goroutineID()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.by[id] > 0 {
		return nil, fmt.Errorf("%w: %s (called from %s)", ErrConnInTx, what, callers())
	}
	if g.by == nil {
		g.by = map[uint64]int{}
	}
	g.by[id]++
	g.open.Add(1)
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.by[id]--; g.by[id] == 0 {
			delete(g.by, id)
		}
		g.open.Add(-1)
	}, nil
}

// check returns ErrConnInTx, naming what was asked, when the calling
// goroutine holds a transaction of the DB; nil otherwise. g may be nil (the
// guard is off).
func (g *txGuard) check(what string) error {
	if g.heldHere() {
		return fmt.Errorf("%w: %s (called from %s)", ErrConnInTx, what, callers())
	}
	return nil
}

// checkQuery is check for a query, named by queryLabel only when it fails
// (the label of a long query is a new string, on every query).
func (g *txGuard) checkQuery(query string) error {
	if g.heldHere() {
		return fmt.Errorf("%w: %s (called from %s)", ErrConnInTx, queryLabel(query), callers())
	}
	return nil
}

// heldHere reports whether the calling goroutine is inside one of the
// DB's transactions.
func (g *txGuard) heldHere() bool {
	if g == nil || g.open.Load() == 0 {
		return false
	}
	id := goroutineID()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.by[id] > 0
}

// callers names the first frames outside this package that led to a
// refused call, so that the error says where to fix it.
func callers() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	var out []string
	for {
		f, more := frames.Next()
		if !strings.Contains(f.Function, "/internal/store.") && f.Function != "" {
			out = append(out, fmt.Sprintf("%s (%s:%d)", f.Function, filepath.Base(f.File), f.Line))
			if len(out) == 12 {
				break
			}
		}
		if !more {
			break
		}
	}
	return strings.Join(out, " ← ")
}

// goroutineID reads the calling goroutine's id from the head of its stack
// trace ("goroutine 42 [running]:").
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		panic("store: cannot read the goroutine id from " + strconv.Quote(string(buf[:])))
	}
	return id
}

// queryLabel shortens a query for an error message.
func queryLabel(query string) string {
	const max = 120
	if len(query) > max {
		return query[:max] + "…"
	}
	return query
}
