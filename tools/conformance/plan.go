package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Entry is one allow-listed go-tfe test, with the environment overrides
// written after its name (KEY=VALUE words).
type Entry struct {
	Name string
	Env  []string
	Line int
	// OwnServer (the word own-server after the name) runs the test
	// against a server of its own, which no other test shares: for a
	// test that asserts on the whole site (every run or workspace of it),
	// which the other tests' resources on a shared server would break.
	OwnServer bool
	// Excluded marks a test of excluded.txt run on request (-excluded),
	// and Reason is why it is excluded.
	Excluded bool
	Reason   string
}

// Exclusion is a test of a covered group that is not run, and why.
type Exclusion struct {
	Name   string
	Reason string
	Line   int
}

// Plan is what the conformance/ files say.
type Plan struct {
	Groups   []string // test-name prefixes whose every test must be classified
	Allow    []Entry
	Excluded []Exclusion
}

// reasonKinds are how every reason in excluded.txt starts.
var reasonKinds = []string{
	"needs VCS/OAuth",
	"needs a run executor (_RunDependent)",
	"needs paid admin endpoint",
	"needs HashiCorp's own agent binary",
	"not implemented yet: ",
}

// ownServerWord after a test's name in allow.txt sets Entry.OwnServer.
const ownServerWord = "own-server"

var (
	testNameRE = regexp.MustCompile(`^Test[A-Za-z0-9_]*$`)
	envWordRE  = regexp.MustCompile(`^[A-Z][A-Z0-9_]*=\S*$`)
)

// readLines returns the meaningful lines of a plan file: '#' starts a
// comment, blank lines are skipped. Each line comes with its number.
func readLines(path string) ([]string, []int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var lines []string
	var nums []int
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line != "" {
			lines = append(lines, line)
			nums = append(nums, n)
		}
	}
	return lines, nums, sc.Err()
}

// LoadPlan reads groups.txt, allow.txt and excluded.txt from dir.
func LoadPlan(dir string) (*Plan, error) {
	p := &Plan{}
	var errs []string
	lines, nums, err := readLines(dir + "/groups.txt")
	if err != nil {
		return nil, err
	}
	for i, l := range lines {
		if len(strings.Fields(l)) != 1 || !testNameRE.MatchString(l) {
			errs = append(errs, fmt.Sprintf("groups.txt:%d: want one test-name prefix such as TestOrganizations, got %q", nums[i], l))
			continue
		}
		p.Groups = append(p.Groups, l)
	}
	lines, nums, err = readLines(dir + "/allow.txt")
	if err != nil {
		return nil, err
	}
	for i, l := range lines {
		f := strings.Fields(l)
		e := Entry{Name: f[0], Line: nums[i]}
		if !testNameRE.MatchString(e.Name) {
			errs = append(errs, fmt.Sprintf("allow.txt:%d: %q is not a top-level test name", e.Line, e.Name))
			continue
		}
		for _, w := range f[1:] {
			if w == ownServerWord {
				e.OwnServer = true
				continue
			}
			if !envWordRE.MatchString(w) {
				errs = append(errs, fmt.Sprintf("allow.txt:%d: after the test name only KEY=VALUE environment overrides and %s may follow, got %q", e.Line, ownServerWord, w))
				continue
			}
			e.Env = append(e.Env, w)
		}
		p.Allow = append(p.Allow, e)
	}
	lines, nums, err = readLines(dir + "/excluded.txt")
	if err != nil {
		return nil, err
	}
	for i, l := range lines {
		name := strings.Fields(l)[0]
		x := Exclusion{Name: name, Reason: strings.TrimSpace(l[len(name):]), Line: nums[i]}
		if !testNameRE.MatchString(x.Name) {
			errs = append(errs, fmt.Sprintf("excluded.txt:%d: %q is not a top-level test name", x.Line, x.Name))
			continue
		}
		if x.Reason == "" {
			errs = append(errs, fmt.Sprintf("excluded.txt:%d: %s has no reason", x.Line, x.Name))
			continue
		}
		if !slices.ContainsFunc(reasonKinds, func(k string) bool { return strings.HasPrefix(x.Reason, k) }) {
			errs = append(errs, fmt.Sprintf("excluded.txt:%d: the reason for %s must start with one of %q", x.Line, x.Name, reasonKinds))
			continue
		}
		p.Excluded = append(p.Excluded, x)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return p, nil
}

// InGroups reports whether a test belongs to one of the covered groups.
func (p *Plan) InGroups(name string) bool {
	for _, g := range p.Groups {
		if strings.HasPrefix(name, g) {
			return true
		}
	}
	return false
}

// Check compares the plan with the tests the go-tfe binary has. Every name
// in either file must exist, appear once, and be in only one file; every
// test of a covered group must be in one of the files, so that nothing is
// dropped silently.
func (p *Plan) Check(available []string) []string {
	have := map[string]bool{}
	for _, n := range available {
		have[n] = true
	}
	var problems []string
	allowed := map[string]int{}
	for _, e := range p.Allow {
		if prev, dup := allowed[e.Name]; dup {
			problems = append(problems, fmt.Sprintf("allow.txt:%d: %s is already listed on line %d", e.Line, e.Name, prev))
		}
		allowed[e.Name] = e.Line
		if !have[e.Name] {
			problems = append(problems, fmt.Sprintf("allow.txt:%d: %s is not a test of go-tfe %s", e.Line, e.Name, goTFEVersion))
		}
	}
	excluded := map[string]int{}
	for _, x := range p.Excluded {
		if prev, dup := excluded[x.Name]; dup {
			problems = append(problems, fmt.Sprintf("excluded.txt:%d: %s is already listed on line %d", x.Line, x.Name, prev))
		}
		excluded[x.Name] = x.Line
		if !have[x.Name] {
			problems = append(problems, fmt.Sprintf("excluded.txt:%d: %s is not a test of go-tfe %s", x.Line, x.Name, goTFEVersion))
		}
		if line, ok := allowed[x.Name]; ok {
			problems = append(problems, fmt.Sprintf("excluded.txt:%d: %s is also allow-listed (allow.txt:%d); keep it in one file", x.Line, x.Name, line))
		}
	}
	var missing []string
	for _, n := range available {
		if !p.InGroups(n) {
			continue
		}
		if _, ok := allowed[n]; ok {
			continue
		}
		if _, ok := excluded[n]; ok {
			continue
		}
		missing = append(missing, n)
	}
	sort.Strings(missing)
	for _, n := range missing {
		problems = append(problems, fmt.Sprintf("%s belongs to a covered group but is in neither allow.txt nor excluded.txt", n))
	}
	return problems
}

// Select returns the allow-listed entries whose names match re (all when
// re is nil), in file order, followed by the matching excluded tests when
// withExcluded is set.
func (p *Plan) Select(re *regexp.Regexp, withExcluded bool) []Entry {
	var out []Entry
	for _, e := range p.Allow {
		if re == nil || re.MatchString(e.Name) {
			out = append(out, e)
		}
	}
	if withExcluded {
		for _, x := range p.Excluded {
			if re == nil || re.MatchString(x.Name) {
				out = append(out, Entry{Name: x.Name, Line: x.Line, Excluded: true, Reason: x.Reason})
			}
		}
	}
	return out
}

// ReasonCounts groups the exclusions by the reason's kind (the text before
// the first ':' or '('), most frequent first.
func (p *Plan) ReasonCounts() []string {
	counts := map[string]int{}
	for _, x := range p.Excluded {
		kind := x.Reason
		if i := strings.IndexAny(kind, ":("); i > 0 {
			kind = kind[:i]
		}
		counts[strings.TrimSpace(kind)]++
	}
	var kinds []string
	for k := range counts {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = fmt.Sprintf("%4d  %s", counts[k], k)
	}
	return out
}
