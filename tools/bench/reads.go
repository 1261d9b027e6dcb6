package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/run"
)

// reads is (e): go-tfe Workspaces.Read by concurrent clients for a fixed
// time as a member of the owners team; Runs.List of one page from
// workspaces with growing histories (the history is written straight into
// the runs table, copies of one real run); and the process's resident
// memory before and after.
func (b *bench) reads(ctx context.Context, clients int, d time.Duration, histories []int, cpuProfile, memProfile string) error {
	fmt.Printf("\n(e) reads: go-tfe Workspaces.Read, %d clients for %s; Runs.List of one page (20) by history size\n", clients, d)
	fmt.Printf("  resident memory (the whole bench process: server and clients) before the reads: %s\n", rss())
	fmt.Printf("  rate limits per token and per address: %.0f/s (go-tfe paces itself at two thirds of the per-token limit; the default, 1000/s, would cap one client at 660 requests/s)\n", float64(benchRateLimit))
	owners, err := b.c.Teams.List(ctx, b.org, &tfe.TeamListOptions{Names: []string{"owners"}})
	if err != nil || len(owners.Items) != 1 {
		return fmt.Errorf("the owners team: %v", err)
	}
	m, err := b.c.OrganizationMemberships.Create(ctx, b.org, tfe.OrganizationMembershipCreateOptions{Email: tfe.String("reader@bench.test"), Teams: owners.Items})
	if err != nil {
		return err
	}
	// An invited user acts with its teams' rights once it accepted.
	if err := b.srv.Teams.ActivateMembership(ctx, b.srv.DB, m.ID); err != nil {
		return fmt.Errorf("accepting the reader's invitation: %w", err)
	}
	_, secret, err := b.srv.Auth.CreateToken(ctx, b.srv.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
	if err != nil {
		return err
	}
	c, err := tfe.NewClient(&tfe.Config{Address: b.srv0URL, Token: secret, HTTPClient: b.http})
	if err != nil {
		return err
	}
	ws, _, err := b.workspace(ctx, smallConfig)
	if err != nil {
		return err
	}
	// A few reads first, to count their store round trips: the least of
	// them, so that the first use of the token (recorded once) and the
	// workspace's run's after-work in the background do not count.
	least := int64(1 << 30)
	for range 5 {
		q0 := b.srv.DB.Queries()
		if _, err := c.Workspaces.Read(ctx, b.org, ws.Name); err != nil {
			return err
		}
		least = min(least, b.srv.DB.Queries()-q0)
	}
	fmt.Printf("  store queries per Workspaces.Read: %d\n", least)
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	if memProfile != "" {
		if err := writeAllocs(memProfile + ".base"); err != nil {
			return err
		}
	}
	postmaster := b.postmaster(ctx)
	cpu0, pg0 := cpuNow().self, postgresCPU(postmaster)
	lat, failed := readLoad(ctx, c, b.org, ws.Name, clients, d)
	// Before the profiles are written (a GC and a file each).
	cpu, pg := cpuNow().self-cpu0, postgresCPU(postmaster)-pg0
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if memProfile != "" {
		if err := writeAllocs(memProfile); err != nil {
			return err
		}
	}
	fmt.Printf("  Workspaces.Read: %.0f requests/s, p50 %s, p99 %s, %d failed\n", float64(len(lat))/d.Seconds(),
		fmtDur(percentile(lat, 50)), fmtDur(percentile(lat, 99)), failed)
	if len(lat) > 0 {
		// Less sensitive to a busy machine than requests/s: the process's
		// CPU time (server and clients together) per request.
		fmt.Printf("  CPU time per Workspaces.Read (server and clients): %s", fmtDur(cpu/time.Duration(len(lat))))
		if pg > 0 {
			fmt.Printf(", and %s in PostgreSQL's processes", fmtDur(pg/time.Duration(len(lat))))
		}
		fmt.Println()
	}
	runtime.GC()
	fmt.Printf("  resident memory after the reads: %s\n", rss())

	// Runs.List from histories of each size. Every history is written
	// first and the lists measured after: measured right after its own
	// run, the smallest history's list shared the machine with that run's
	// after-work (its largest history took long enough to write for the
	// work to end), which made the lists look faster as histories grew.
	type history struct {
		n       int
		ws      *tfe.Workspace
		written time.Duration
	}
	var hs []history
	for _, n := range histories {
		hw, cv, err := b.workspace(ctx, smallConfig)
		if err != nil {
			return err
		}
		r, err := b.c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: hw, ConfigurationVersion: cv, AutoApply: tfe.Bool(true)})
		if err != nil {
			return err
		}
		if _, _, err := b.await(ctx, r.ID, 20*time.Millisecond); err != nil {
			return err
		}
		t0 := time.Now()
		if err := b.history(ctx, r.ID, n-1); err != nil {
			return fmt.Errorf("writing a history of %d runs: %w", n, err)
		}
		hs = append(hs, history{n: n, ws: hw, written: time.Since(t0)})
	}
	var medians []time.Duration
	for _, h := range hs {
		n, hw := h.n, h.ws
		var ls []time.Duration
		q0 := b.srv.DB.Queries()
		if _, err := c.Runs.List(ctx, hw.ID, &tfe.RunListOptions{ListOptions: tfe.ListOptions{PageSize: 20}}); err != nil {
			return err
		}
		queries := b.srv.DB.Queries() - q0
		for i := -5; i < 100; i++ {
			t0 := time.Now()
			page, err := c.Runs.List(ctx, hw.ID, &tfe.RunListOptions{ListOptions: tfe.ListOptions{PageSize: 20}})
			if err != nil {
				return err
			}
			if page.TotalCount != n || len(page.Items) != 20 && n >= 20 {
				return fmt.Errorf("a page of %d runs of %d (total %d)", len(page.Items), n, page.TotalCount)
			}
			if i >= 0 {
				ls = append(ls, time.Since(t0))
			}
		}
		medians = append(medians, median(ls))
		fmt.Printf("  Runs.List, one page of a workspace with %d runs: median %s, p99 %s, %d store queries (history written in %s)\n", n, fmtDur(median(ls)), fmtDur(percentile(ls, 99)), queries, h.written.Round(time.Millisecond))
	}
	if len(medians) > 1 {
		lo, hi := slices.Min(medians), slices.Max(medians)
		fmt.Printf("  largest / smallest median: %.2f (target within 20%%: %s)\n", float64(hi)/float64(lo), map[bool]string{true: "meets", false: "misses"}[float64(hi) <= 1.2*float64(lo)])
	}
	if err := b.workspaceLists(ctx, listSizes); err != nil {
		return err
	}
	if err := b.membershipLists(ctx, listSizes); err != nil {
		return err
	}
	return b.resourceLists(ctx, listSizes)
}

// listSizes are the organization sizes (e) lists a page from.
var listSizes = []int{100, 1000, 10000}

// history writes n copies of the run id, older than it, into its
// workspace's history, in batches, and counts them in run_counts.
func (b *bench) history(ctx context.Context, id string, n int) error {
	var doc string
	if err := b.srv.DB.QueryRow(ctx, `SELECT doc FROM runs WHERE id = ?`, id).Scan(&doc); err != nil {
		return err
	}
	var tmpl run.Run
	if err := json.Unmarshal([]byte(doc), &tmpl); err != nil {
		return err
	}
	const batch = 400
	for done := 0; done < n; {
		k := min(batch, n-done)
		var sb strings.Builder
		sb.WriteString(`INSERT INTO runs (id, workspace_id, organization_name, configuration_version_id, status, plan_only, assessment, plan_id, apply_id, created_at, updated_at, doc) VALUES `)
		var args []any
		for i := range k {
			r := tmpl
			r.ID, r.Plan.ID, r.Apply.ID = core.NewID(core.PrefixRun), core.NewID(core.PrefixPlan), core.NewID(core.PrefixApply)
			r.CreatedAt = tmpl.CreatedAt.Add(-time.Duration(done+i+1) * time.Second)
			js, err := json.Marshal(&r)
			if err != nil {
				return err
			}
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(`(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
			args = append(args, r.ID, r.WorkspaceID, r.Organization, r.ConfigurationVersionID, string(r.Status), r.PlanOnly, false, r.Plan.ID, r.Apply.ID,
				core.Micros(r.CreatedAt), core.Micros(r.UpdatedAt), string(js))
		}
		if _, err := b.srv.DB.Exec(ctx, sb.String(), args...); err != nil {
			return err
		}
		done += k
	}
	_, err := b.srv.DB.Exec(ctx, `UPDATE run_counts SET runs = runs + ? WHERE workspace_id = ?`, n, tmpl.WorkspaceID)
	return err
}

// rss is this process's resident set size from /proc.
func rss() string {
	if v := procStatus("self")["VmRSS"]; v != "" {
		return v
	}
	return "unknown"
}

func fmtDur(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

// writeAllocs writes the process's allocations so far (the allocs profile,
// after a GC so that it is up to date) to file.
func writeAllocs(file string) error {
	runtime.GC()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
