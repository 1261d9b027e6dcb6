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
	postmaster := b.postmaster(ctx)
	pg0, cpu0, start := postgresCPU(postmaster), cpuNow(), time.Now()
	for range n {
		if _, err := b.c.Runs.Read(ctx, id); err != nil {
			return err
		}
	}
	wall, cpu, pg := time.Since(start), cpuNow().sub(cpu0), postgresCPU(postmaster)-pg0
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

// postmaster is the PID of the bench's own PostgreSQL server (the parent
// of a backend of the server's pool), 0 on SQLite or when it cannot say.
func (b *bench) postmaster(ctx context.Context) int {
	if b.srv.DB.Driver().Name() != "postgres" {
		return 0
	}
	var backend int
	if err := b.srv.DB.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return 0
	}
	f := procStat(backend)
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// postgresCPU is the CPU time (user and system) of the PostgreSQL server
// whose postmaster is given and of its live children (the backends of the
// pool outlive the reads): another PostgreSQL on the machine is not
// counted. Zero without one.
func postgresCPU(postmaster int) time.Duration {
	if postmaster == 0 {
		return 0
	}
	ents, _ := os.ReadDir("/proc")
	var ticks int64
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := procStat(pid)
		if len(f) < 13 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); pid != postmaster && ppid != postmaster {
			continue
		}
		ticks += statTicks(f)
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}

// procCPU is process pid's CPU time (user and system) so far, to 10 ms;
// 0 when it cannot be read.
func procCPU(pid int) time.Duration {
	return time.Duration(statTicks(procStat(pid))) * time.Second / 100
}

// statTicks is utime + stime of a procStat, in clock ticks.
func statTicks(f []string) int64 {
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

// procStat is /proc/PID/stat after the command's closing parenthesis:
// state, ppid, …, majflt (index 9), utime (11), stime (12); nil when it
// cannot be read.
func procStat(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return nil
	}
	return strings.Fields(s[end+1:])
}
