package main

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/core"
)

// workspaceLists is (e)'s Workspaces.List: one page (20, by name) from
// organizations of each size, as the site admin. Each organization's
// workspaces are copies of one made through the API, written straight
// into the workspaces table.
func (b *bench) workspaceLists(ctx context.Context, sizes []int) error {
	var medians []time.Duration
	for _, n := range sizes {
		org := fmt.Sprintf("list-%d", n)
		if _, err := b.c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(org), Email: tfe.String("bench@example.test")}); err != nil {
			return err
		}
		ws, err := b.c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("w-000000")})
		if err != nil {
			return err
		}
		t0 := time.Now()
		if err := b.copyWorkspace(ctx, ws.ID, n-1); err != nil {
			return fmt.Errorf("writing %d workspaces: %w", n, err)
		}
		written := time.Since(t0)
		m, err := pageMedian(n, func() (int, int, error) {
			page, err := b.c.Workspaces.List(ctx, org, &tfe.WorkspaceListOptions{ListOptions: tfe.ListOptions{PageSize: 20}})
			if err != nil {
				return 0, 0, err
			}
			return len(page.Items), page.TotalCount, nil
		})
		if err != nil {
			return fmt.Errorf("workspaces: %w", err)
		}
		medians = append(medians, m)
		fmt.Printf("  Workspaces.List, one page of an organization with %d workspaces: median %s (written in %s)\n", n, fmtDur(m), written.Round(time.Millisecond))
	}
	printSpread(medians)
	return nil
}

// pageMedian lists one page of 20 five times to warm up and 100 times
// measured, and returns the median; every page must hold min(20, total)
// items of total.
func pageMedian(total int, list func() (items, total int, err error)) (time.Duration, error) {
	var ls []time.Duration
	for i := -5; i < 100; i++ {
		t0 := time.Now()
		n, of, err := list()
		if err != nil {
			return 0, err
		}
		if of != total || n != min(20, total) {
			return 0, fmt.Errorf("a page of %d of %d (want %d of %d)", n, of, min(20, total), total)
		}
		if i >= 0 {
			ls = append(ls, time.Since(t0))
		}
	}
	return median(ls), nil
}

// printSpread prints the largest median over the smallest.
func printSpread(medians []time.Duration) {
	if len(medians) > 1 {
		lo, hi := slices.Min(medians), slices.Max(medians)
		fmt.Printf("  largest / smallest median: %.2f\n", float64(hi)/float64(lo))
	}
}

// copyWorkspace writes n copies of workspace id into its organization
// (every column copied but the ID and the name).
func (b *bench) copyWorkspace(ctx context.Context, id string, n int) error {
	return b.copyRow(ctx, "workspaces", id, n, func(col string, i int) (any, bool) {
		switch col {
		case "id":
			return core.NewID(core.PrefixWorkspace), true
		case "name":
			return fmt.Sprintf("w-%06d", i+1), true
		}
		return nil, false
	})
}

// copyRow writes n copies of the row of table whose id is id, in batches:
// every column copied but those vary gives a value for (copy i of n).
func (b *bench) copyRow(ctx context.Context, table, id string, n int, vary func(col string, i int) (any, bool)) error {
	rows, err := b.srv.DB.Query(ctx, `SELECT * FROM `+table+` WHERE id = ?`, id)
	if err != nil {
		return err
	}
	cols, err := rows.Columns()
	if err != nil {
		rows.Close()
		return err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if !rows.Next() {
		rows.Close()
		return fmt.Errorf("%s %s not found", table, id)
	}
	if err := rows.Scan(ptrs...); err != nil {
		rows.Close()
		return err
	}
	rows.Close()
	const batch = 200
	for done := 0; done < n; {
		k := min(batch, n-done)
		var sb strings.Builder
		sb.WriteString(`INSERT INTO ` + table + ` (` + strings.Join(cols, ", ") + `) VALUES `)
		var args []any
		for i := range k {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(`(` + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + `)`)
			for j, col := range cols {
				v := vals[j]
				if w, ok := vary(col, done+i); ok {
					v = w
				}
				args = append(args, v)
			}
		}
		if _, err := b.srv.DB.Exec(ctx, sb.String(), args...); err != nil {
			return err
		}
		done += k
	}
	// As PostgreSQL's autovacuum would soon after a bulk load: without
	// statistics its planner takes a 10,000-row table for an empty one.
	if b.srv.DB.Driver().Name() == "postgres" {
		_, err := b.srv.DB.Exec(ctx, `ANALYZE `+table)
		return err
	}
	return nil
}

// membershipLists is (e)'s OrganizationMemberships.List: one page (20)
// from organizations of each size, as the site admin. Each organization's
// members are copies of one invited through the API (its user and its
// membership), written straight into the tables.
func (b *bench) membershipLists(ctx context.Context, sizes []int) error {
	var medians []time.Duration
	for _, n := range sizes {
		org := fmt.Sprintf("members-%d", n)
		if _, err := b.c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(org), Email: tfe.String("bench@example.test")}); err != nil {
			return err
		}
		m, err := b.c.OrganizationMemberships.Create(ctx, org, tfe.OrganizationMembershipCreateOptions{Email: tfe.String(org + "-0@bench.test")})
		if err != nil {
			return err
		}
		t0 := time.Now()
		users := make([]string, n-1)
		for i := range users {
			users[i] = core.NewID(core.PrefixUser)
		}
		if err := b.copyRow(ctx, "users", m.User.ID, n-1, func(col string, i int) (any, bool) {
			switch col {
			case "id":
				return users[i], true
			case "username":
				return fmt.Sprintf("%s-%d", org, i+1), true
			case "email":
				return fmt.Sprintf("%s-%d@bench.test", org, i+1), true
			}
			return nil, false
		}); err != nil {
			return fmt.Errorf("writing %d users: %w", n, err)
		}
		if err := b.copyRow(ctx, "organization_memberships", m.ID, n-1, func(col string, i int) (any, bool) {
			switch col {
			case "id":
				return core.NewID("ou"), true
			case "user_id":
				return users[i], true
			}
			return nil, false
		}); err != nil {
			return fmt.Errorf("writing %d memberships: %w", n, err)
		}
		written := time.Since(t0)
		med, err := pageMedian(n+1, func() (int, int, error) {
			page, err := b.c.OrganizationMemberships.List(ctx, org, &tfe.OrganizationMembershipListOptions{ListOptions: tfe.ListOptions{PageSize: 20}})
			if err != nil {
				return 0, 0, err
			}
			return len(page.Items), page.TotalCount, nil
		})
		if err != nil {
			return fmt.Errorf("memberships: %w", err)
		}
		medians = append(medians, med)
		fmt.Printf("  OrganizationMemberships.List, one page of an organization with %d members: median %s (written in %s)\n", n+1, fmtDur(med), written.Round(time.Millisecond))
	}
	printSpread(medians)
	return nil
}

// resourceLists is (e)'s WorkspaceResources.List: one page (20) of the
// resource instances in a workspace's current state, for states of each
// size (terraform_data instances with a few hundred bytes of attributes
// each, uploaded through the API). The first listing of a version, which
// parses the state and keeps its instances in the store, is timed apart.
func (b *bench) resourceLists(ctx context.Context, sizes []int) error {
	org := "resources"
	if _, err := b.c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(org), Email: tfe.String("bench@example.test")}); err != nil {
		return err
	}
	var medians []time.Duration
	for _, n := range sizes {
		ws, err := b.c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String(fmt.Sprintf("state-%d", n))})
		if err != nil {
			return err
		}
		raw := benchState(n)
		if _, err := b.c.Workspaces.Lock(ctx, ws.ID, tfe.WorkspaceLockOptions{}); err != nil {
			return err
		}
		if _, err := b.c.StateVersions.Create(ctx, ws.ID, tfe.StateVersionCreateOptions{
			Serial: tfe.Int64(1), Lineage: tfe.String("bench-lineage"), MD5: tfe.String(fmt.Sprintf("%x", md5.Sum(raw))), State: tfe.String(base64.StdEncoding.EncodeToString(raw)),
		}); err != nil {
			return fmt.Errorf("uploading a state of %d instances: %w", n, err)
		}
		list := func() (int, int, error) {
			page, err := b.c.WorkspaceResources.List(ctx, ws.ID, &tfe.WorkspaceResourceListOptions{ListOptions: tfe.ListOptions{PageSize: 20, PageNumber: 2}})
			if err != nil {
				return 0, 0, err
			}
			return len(page.Items), page.TotalCount, nil
		}
		t0 := time.Now()
		if _, _, err := list(); err != nil {
			return err
		}
		first := time.Since(t0)
		m, err := pageMedian(n, list)
		if err != nil {
			return fmt.Errorf("resources: %w", err)
		}
		medians = append(medians, m)
		fmt.Printf("  WorkspaceResources.List, page 2 of a state of %d instances (%d kB): median %s (the version's first listing: %s)\n", n, len(raw)/1000, fmtDur(m), fmtDur(first))
	}
	printSpread(medians)
	return nil
}

// benchState is a state file of n terraform_data instances.
func benchState(n int) []byte {
	instances := make([]any, n)
	for i := range instances {
		instances[i] = map[string]any{"index_key": i, "schema_version": 0, "attributes": map[string]any{
			"id": fmt.Sprintf("%08x-0000-4000-8000-000000000000", i), "input": map[string]any{"value": strings.Repeat("v", 200), "type": "string"}, "output": nil, "triggers_replace": nil,
		}}
	}
	b, _ := json.Marshal(map[string]any{
		"version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "bench-lineage", "outputs": map[string]any{},
		"resources": []any{map[string]any{"mode": "managed", "type": "terraform_data", "name": "d", "provider": `provider["terraform.io/builtin/terraform"]`, "instances": instances}},
	})
	return b
}
