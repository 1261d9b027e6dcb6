package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestReadmeFlagTable: every flag of `terrace server` is in the README's
// flag tables, every flag a table names exists, and the README states the
// environment twin rule (TERRACE_ + the flag's name) that envTwins applies
// to every flag, with the _FILE form for the secrets.
func TestReadmeFlagTable(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatalf("reading the README: %v", err)
	}
	readme := string(b)
	// Flags named in the flag tables' rows: the first cell names the row's
	// flags (which must exist), the meaning may name more of them (and
	// flags of other commands, as --heartbeat of terrace agent).
	named, rows := map[string]bool{}, map[string]bool{}
	flagRe := regexp.MustCompile("`--([a-z0-9-]+)`")
	for _, line := range strings.Split(readme, "\n") {
		if !strings.HasPrefix(line, "| `--") {
			continue
		}
		for _, m := range flagRe.FindAllStringSubmatch(line, -1) {
			named[m[1]] = true
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
		for _, m := range flagRe.FindAllStringSubmatch(first, -1) {
			rows[m[1]] = true
		}
	}
	if len(rows) < 10 {
		t.Fatalf("found %d flags in the README's tables: the test does not read them right", len(named))
	}
	server := map[string]bool{}
	serverCmd().Flags().VisitAll(func(f *pflag.Flag) {
		server[f.Name] = true
		if !named[f.Name] {
			t.Errorf("terrace server --%s (environment TERRACE_%s) is not in the README's flag table", f.Name, strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")))
		}
	})
	for name := range rows {
		if !server[name] {
			t.Errorf("the README's flag table names --%s, which terrace server does not have", name)
		}
	}
	for _, want := range []string{"`TERRACE_DATA_DIR`", "TERRACE_SMTP_PASSWORD_FILE", "TERRACE_KEK_FILE"} {
		if !strings.Contains(readme, want) {
			t.Errorf("the README does not mention %s", want)
		}
	}
}
