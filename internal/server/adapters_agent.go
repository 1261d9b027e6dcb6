package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/terracehq/terrace/internal/agent"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/moduletest"
	"github.com/terracehq/terrace/internal/organization"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/registry"
	"github.com/terracehq/terrace/internal/runtask"
	"github.com/terracehq/terrace/internal/stack"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/workspace"
)

// poolInUse refuses to delete an agent pool that something still names
// (agent.Service.OnDelete): workspaces, stacks and modules (their tests)
// would queue runs no agent takes, and their unfinished test runs would
// never end; projects and the organization would give new workspaces a
// pool that no longer exists, run tasks would send from the server
// instead. Each domain counts its own.
func poolInUse(ctx context.Context, q store.Q, p *agent.Pool) error {
	var uses []string
	for _, c := range []struct {
		what  string
		count func(context.Context, store.Q, string) (int, error)
	}{
		{"workspace", workspace.UsingPool}, {"project", project.UsingPool}, {"stack", stack.UsingPool}, {"run task", runtask.UsingPool},
		{"registry module", registry.UsingPool}, {"unfinished module test run", moduletest.UsingPool},
	} {
		n, err := c.count(ctx, q, p.ID)
		if err != nil {
			return err
		}
		if n > 0 {
			uses = append(uses, fmt.Sprintf("%d %s(s)", n, c.what))
		}
	}
	isDefault, err := organization.UsesPool(ctx, q, p.Organization, p.ID)
	if err != nil {
		return err
	}
	if isDefault {
		uses = append(uses, "the organization's default agent pool setting")
	}
	if len(uses) > 0 {
		return core.Conflict("agent pool %s is still used by %s: give them another pool or execution mode first", p.Name, strings.Join(uses, ", "))
	}
	return nil
}
