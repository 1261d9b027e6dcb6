// Package loops gives every background loop of a Terrace server one
// start/stop lifecycle (a Group), runs the loops that must run once per
// cluster on one replica at a time (Leader), and carries wake-ups between
// replicas (Bell).
//
// A loop is a func(ctx): it runs until ctx ends and returns. Nothing here
// starts a goroutine on context.Background: every goroutine descends from
// the context the Group was made with, and Stop waits for all of them.
package loops

import (
	"context"
	"log/slog"
	"runtime/debug"
	"sync"
)

// Group is a set of loops with one lifecycle.
type Group struct {
	ctx    context.Context
	cancel context.CancelFunc
	logger *slog.Logger
	wg     sync.WaitGroup
	mu     sync.Mutex
	names  map[string]int // running loops by name (for tests and logs)
}

// NewGroup returns a Group whose loops run until ctx ends or Stop.
func NewGroup(ctx context.Context, logger *slog.Logger) *Group {
	if logger == nil {
		logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(ctx)
	return &Group{ctx: ctx, cancel: cancel, logger: logger, names: map[string]int{}}
}

// Context is the context the Group's loops run under.
func (g *Group) Context() context.Context { return g.ctx }

// Go starts fn(ctx) as the loop name. A panic in a loop is logged and ends
// only that loop.
func (g *Group) Go(name string, fn func(ctx context.Context)) {
	g.mu.Lock()
	g.names[name]++
	g.mu.Unlock()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer func() {
			g.mu.Lock()
			if g.names[name]--; g.names[name] <= 0 {
				delete(g.names, name)
			}
			g.mu.Unlock()
		}()
		defer func() {
			if r := recover(); r != nil {
				g.logger.Error("background loop panicked", "loop", name, "panic", r, "stack", string(debug.Stack()))
			}
		}()
		fn(g.ctx)
	}()
}

// Running reports how many loops called name are running.
func (g *Group) Running(name string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.names[name]
}

// Stop ends every loop and waits for them to return.
func (g *Group) Stop() {
	g.cancel()
	g.wg.Wait()
}
