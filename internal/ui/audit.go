package ui

import (
	"context"
	"errors"
	"net/http"

	"github.com/terracehq/terrace/internal/audit"
	"github.com/terracehq/terrace/internal/core"
)

// auditTrail shows the organization's audit events to those who manage
// it, newest first (page 1 is the latest), a page at a time, with links
// to the newer and the older page. The API lists oldest first; the page
// asks the store for its own order.
func (u *UI) auditTrail(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	org := r.PathValue("org")
	events, pg, err := listPage(r.URL.Query(), func(offset, limit int) ([]*audit.Event, int, error) {
		return u.o.Audit.ListOrganization(ctx, org, audit.Filter{Page: offset/limit + 1, Size: limit, NewestFirst: true})
	})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	targets := u.auditTargets(ctx, org, events)
	rows := make([]auditRow, len(events))
	for i, ev := range events {
		rows[i] = auditRow{Event: ev, Target: targets[ev.Resource.ID]}
	}
	u.render(w, r, http.StatusOK, "audit", "Audit trail", org, map[string]any{"Events": rows, "Pager": pg})
}

// auditRow is an event as the trail shows it.
type auditRow struct {
	*audit.Event
	Target auditTarget
}

// auditTarget names an event's resource: its name and page for the
// workspaces, runs, projects and teams that still exist; Gone for those
// deleted since. The zero value shows the ID as recorded (an ID of a
// kind the page does not look up, or a name a route named it by).
type auditTarget struct {
	Name, Href string
	Gone       bool
}

// auditTargets looks up the resources of a page of events, each once,
// as the caller (who manages the organization, and so reads them all).
// An error other than not found leaves the ID shown: the trail is
// still worth reading without names.
func (u *UI) auditTargets(ctx context.Context, org string, events []*audit.Event) map[string]auditTarget {
	out := map[string]auditTarget{}
	for _, ev := range events {
		id := ev.Resource.ID
		if _, seen := out[id]; seen || id == "" {
			continue
		}
		// auditTarget answers the zero value with any error.
		t, err := u.auditTarget(ctx, org, id)
		if core.KindOf(err) == core.KindNotFound {
			t = auditTarget{Gone: true}
		}
		out[id] = t
	}
	return out
}

func (u *UI) auditTarget(ctx context.Context, org, id string) (auditTarget, error) {
	switch {
	case core.HasPrefix(id, core.PrefixWorkspace):
		w, err := u.o.Workspaces.Get(ctx, id)
		if err != nil || w.Organization != org {
			return auditTarget{}, notFoundIn(err)
		}
		return auditTarget{Name: w.Name, Href: orgPath(org, "workspaces", w.Name)}, nil
	case core.HasPrefix(id, core.PrefixRun):
		rn, err := u.o.Runs.Get(ctx, id)
		if err != nil {
			return auditTarget{}, err
		}
		w, err := u.o.Workspaces.Get(ctx, rn.WorkspaceID)
		if err != nil || w.Organization != org {
			return auditTarget{}, notFoundIn(err)
		}
		return auditTarget{Name: id + " in " + w.Name, Href: orgPath(org, "workspaces", w.Name, "runs", id)}, nil
	case core.HasPrefix(id, core.PrefixProject) && u.o.Projects != nil:
		p, err := u.o.Projects.Get(ctx, id)
		if err != nil || p.Organization != org {
			return auditTarget{}, notFoundIn(err)
		}
		return auditTarget{Name: p.Name, Href: projectWorkspacesPath(org, p.ID)}, nil
	case core.HasPrefix(id, core.PrefixTeam) && u.o.Teams != nil:
		t, err := u.o.Teams.Get(ctx, id)
		if err != nil || t.Organization != org {
			return auditTarget{}, notFoundIn(err)
		}
		return auditTarget{Name: t.Name, Href: orgPath(org, "teams")}, nil
	}
	return auditTarget{}, nil
}

// notFoundIn is err, or errOtherOrganization when the read succeeded
// but the resource is another organization's: an event names its own
// organization's resources, and the page shows no other's name (the ID
// as recorded instead).
func notFoundIn(err error) error {
	if err != nil {
		return err
	}
	return errOtherOrganization
}

var errOtherOrganization = errors.New("ui: the resource is another organization's")
