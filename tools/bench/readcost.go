package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// readCost reads one run through go-tfe n times, one read after another,
// and prints what one read costs in CPU: this process's (the server and
// the go-tfe client, which share it) and PostgreSQL's processes'. Each of
// (a)'s polls takes that much from the terraform the run waits for.
func (b *bench) readCost(ctx context.Context, id string, n int, poll time.Duration) error {
	pg0, cpu0, start := postgresCPU(), cpuNow(), time.Now()
	for range n {
		if _, err := b.c.Runs.Read(ctx, id); err != nil {
			return err
		}
	}
	wall, cpu, pg := time.Since(start), cpuNow().sub(cpu0), postgresCPU()-pg0
	per := func(d time.Duration) time.Duration { return d / time.Duration(n) }
	total := per(cpu.self) + per(pg)
	fmt.Printf("  one run read (go-tfe Runs.Read, %d one after another): %dµs of wall time; CPU %dµs in this process (server and client)",
		n, per(wall).Microseconds(), per(cpu.self).Microseconds())
	if pg > 0 {
		fmt.Printf(" + %dµs in PostgreSQL's processes", per(pg).Microseconds())
	}
	fmt.Printf(";\n    at one read every %s the polls take %.0f%% of one CPU from the run\n", poll, 100*float64(total)/float64(poll))
	return nil
}

// postgresCPU is the CPU time (user and system) of every live process
// named postgres: the throwaway server and the backends of the pool,
// which outlive the reads. Zero without PostgreSQL.
func postgresCPU() time.Duration {
	ents, _ := os.ReadDir("/proc")
	var ticks int64
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid … utime stime: fields 14 and 15, the
		// 12th and 13th after the command's closing parenthesis.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != "postgres" {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}
