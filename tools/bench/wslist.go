package main

import (
	"context"
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
		measure := func(o *tfe.WorkspaceListOptions, want int) (time.Duration, error) {
			var ls []time.Duration
			for i := -5; i < 100; i++ {
				t0 := time.Now()
				page, err := b.c.Workspaces.List(ctx, org, o)
				if err != nil {
					return 0, err
				}
				if page.TotalCount != want || len(page.Items) != min(20, want) {
					return 0, fmt.Errorf("a page of %d workspaces of %d (want %d)", len(page.Items), page.TotalCount, want)
				}
				if i >= 0 {
					ls = append(ls, time.Since(t0))
				}
			}
			return median(ls), nil
		}
		all, err := measure(&tfe.WorkspaceListOptions{ListOptions: tfe.ListOptions{PageSize: 20}}, n)
		if err != nil {
			return err
		}
		medians = append(medians, all)
		fmt.Printf("  Workspaces.List, one page of an organization with %d workspaces: median %s (written in %s)\n", n, fmtDur(all), written.Round(time.Millisecond))
	}
	if len(medians) > 1 {
		lo, hi := slices.Min(medians), slices.Max(medians)
		fmt.Printf("  largest / smallest median: %.2f\n", float64(hi)/float64(lo))
	}
	return nil
}

// copyWorkspace writes n copies of workspace id into its organization
// (every column copied but the ID, the name and the times), in batches.
func (b *bench) copyWorkspace(ctx context.Context, id string, n int) error {
	rows, err := b.srv.DB.Query(ctx, `SELECT * FROM workspaces WHERE id = ?`, id)
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
		return fmt.Errorf("workspace %s not found", id)
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
		sb.WriteString(`INSERT INTO workspaces (` + strings.Join(cols, ", ") + `) VALUES `)
		var args []any
		for i := range k {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(`(` + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + `)`)
			for j, col := range cols {
				v := vals[j]
				switch col {
				case "id":
					v = core.NewID(core.PrefixWorkspace)
				case "name":
					v = fmt.Sprintf("w-%06d", done+i+1)
				}
				args = append(args, v)
			}
		}
		if _, err := b.srv.DB.Exec(ctx, sb.String(), args...); err != nil {
			return err
		}
		done += k
	}
	return nil
}
