package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/run"
)

// triggers is (d): declared run triggers (auto-apply-run-trigger) in a
// chain ws-0 → ws-1 → … and a fan-out origin → n dependents. Times come
// from the server's own stamps (microseconds): the origin's applied-at,
// each dependent's created-at, planning-at and applied-at.
func (b *bench) triggers(ctx context.Context, chain, fanout, concurrency int) error {
	if chain > 1 {
		wss, err := b.dependents(ctx, chain)
		if err != nil {
			return err
		}
		for i := 1; i < len(wss); i++ {
			if _, err := b.c.RunTriggers.Create(ctx, wss[i].ID, tfe.RunTriggerCreateOptions{Sourceable: wss[i-1]}); err != nil {
				return err
			}
		}
		origin, runs, err := b.fire(ctx, wss[0], wss[1:])
		if err != nil {
			return err
		}
		sources := append([]*run.Run{origin}, runs[:len(runs)-1]...)
		var hops, execs []time.Duration
		var execSum time.Duration
		for i, r := range runs {
			hops = append(hops, r.Timestamps["planning-at"].Sub(sources[i].Timestamps["applied-at"]))
			e := r.Timestamps["applied-at"].Sub(r.Timestamps["planning-at"])
			execs = append(execs, e)
			execSum += e
		}
		total := runs[len(runs)-1].Timestamps["applied-at"].Sub(origin.Timestamps["applied-at"])
		fmt.Printf("\n(d) run triggers, a chain of %d workspaces (1 resource each), runner concurrency %d\n", chain, concurrency)
		fmt.Printf("  origin applied → last of %d dependents applied: %s; the dependents' own runs (planning → applied) %s in all, median %s\n",
			len(runs), total.Round(time.Millisecond), execSum.Round(time.Millisecond), ms(median(execs)))
		fmt.Printf("  overhead per hop (source applied → dependent planning): median %s, p99 %s, mean %s\n",
			ms(median(hops)), ms(percentile(hops, 99)), ms((total-execSum)/time.Duration(len(runs))))
	}
	if fanout > 0 {
		wss, err := b.dependents(ctx, fanout+1)
		if err != nil {
			return err
		}
		for _, w := range wss[1:] {
			if _, err := b.c.RunTriggers.Create(ctx, w.ID, tfe.RunTriggerCreateOptions{Sourceable: wss[0]}); err != nil {
				return err
			}
		}
		origin, runs, err := b.fire(ctx, wss[0], wss[1:])
		if err != nil {
			return err
		}
		applied := origin.Timestamps["applied-at"]
		var created, started []time.Duration
		var last time.Time
		for _, r := range runs {
			created = append(created, r.CreatedAt.Sub(applied))
			started = append(started, r.Timestamps["planning-at"].Sub(applied))
			if t := r.Timestamps["applied-at"]; t.After(last) {
				last = t
			}
		}
		fmt.Printf("\n(d) run triggers, a fan-out of 1 → %d (1 resource each), runner concurrency %d\n", fanout, concurrency)
		fmt.Printf("  origin applied → last dependent applied: %s\n", last.Sub(applied).Round(time.Millisecond))
		fmt.Printf("  origin applied → dependent run created (the fan-out itself): median %s, last %s\n", ms(median(created)), ms(slices.Max(created)))
		fmt.Printf("  origin applied → first dependent planning: %s (later ones wait for a runner slot)\n", ms(slices.Min(started)))
	}
	return nil
}

// dependents creates n workspaces with an uploaded configuration whose
// triggered runs auto-apply.
func (b *bench) dependents(ctx context.Context, n int) ([]*tfe.Workspace, error) {
	var out []*tfe.Workspace
	for range n {
		ws, _, err := b.workspace(ctx, smallConfig)
		if err != nil {
			return nil, err
		}
		if ws, err = b.c.Workspaces.UpdateByID(ctx, ws.ID, tfe.WorkspaceUpdateOptions{AutoApplyRunTrigger: tfe.Bool(true)}); err != nil {
			return nil, err
		}
		out = append(out, ws)
	}
	return out, nil
}

// fire applies origin and waits until every workspace in deps has an
// applied run; it returns the stored runs, deps' in order.
func (b *bench) fire(ctx context.Context, origin *tfe.Workspace, deps []*tfe.Workspace) (*run.Run, []*run.Run, error) {
	r, err := b.c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: origin, AutoApply: tfe.Bool(true)})
	if err != nil {
		return nil, nil, err
	}
	if r, _, err = b.await(ctx, r.ID, 20*time.Millisecond); err != nil {
		return nil, nil, err
	}
	if r.Status != tfe.RunApplied {
		return nil, nil, fmt.Errorf("the origin run %s ended %s", r.ID, r.Status)
	}
	o, err := b.stored(ctx, r.ID)
	if err != nil {
		return nil, nil, err
	}
	out := make([]*run.Run, len(deps))
	deadline := time.Now().Add(30 * time.Minute)
	for i, w := range deps {
		for {
			l, err := b.c.Runs.List(ctx, w.ID, nil)
			if err != nil {
				return nil, nil, err
			}
			if len(l.Items) > 0 {
				if out[i], err = b.stored(ctx, l.Items[0].ID); err != nil {
					return nil, nil, err
				}
				if out[i].Status == run.Applied {
					break
				}
				if out[i].Status.Final() {
					return nil, nil, fmt.Errorf("the triggered run %s in %s ended %s", out[i].ID, w.Name, out[i].Status)
				}
			}
			if time.Now().After(deadline) {
				return nil, nil, fmt.Errorf("%s has no applied run after 30 minutes", w.Name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return o, out, nil
}
