package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/jobapi"
	"github.com/terracehq/terrace/internal/runner"
)

// agents (f) measures the job protocol's overhead: the throughput of (c)
// with the in-process runner, then the same with two `terrace agent`s on
// this machine (in this process, speaking HTTPS to the server) that
// together run as many jobs at once as the in-process runner.
func (b *bench) agents(ctx context.Context, n, concurrency int) error {
	inproc, err := b.throughput(ctx, "(f) in-process runner:", n, concurrency)
	if err != nil {
		return err
	}
	pool, err := b.c.AgentPools.Create(ctx, b.org, tfe.AgentPoolCreateOptions{Name: tfe.String("bench")})
	if err != nil {
		return err
	}
	tok, err := b.c.AgentTokens.Create(ctx, pool.ID, tfe.AgentTokenCreateOptions{Description: tfe.String("bench")})
	if err != nil {
		return err
	}
	actx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := jobapi.RunAgent(actx, jobapi.AgentConfig{
				Address: "https://" + b.host, Token: tok.Token, Name: fmt.Sprintf("bench-%d", i+1), CAFile: b.caFile,
				Runner: runner.Config{Concurrency: max(concurrency/2, 1), ScratchDir: b.tmp},
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				fmt.Println("  agent:", err)
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	b.pool = pool.ID
	defer func() { b.pool = "" }()
	agents, err := b.throughput(ctx, "(f) 2 agents over HTTPS:", n, 2*max(concurrency/2, 1))
	if err != nil {
		return err
	}
	fmt.Printf("  agents vs in-process: %.0f vs %.0f runs per minute (%+.1f%%; target: within 10%%)\n", agents, inproc, 100*(agents-inproc)/inproc)
	return nil
}
