package walk

import (
	"strings"

	gitignore "github.com/sabhiram/go-gitignore"
)

// rule is one gitignore pattern with the folder of the file that holds it.
// go-gitignore reports a matching negated pattern the same as no match, so
// each pattern is compiled alone and the negation kept here: the last
// matching rule, from the root's files down to the deepest, decides.
type rule struct {
	base   string // slash-separated folder relative to the walk root, "" for the root
	m      *gitignore.GitIgnore
	negate bool
}

func appendRules(rules []rule, base string, lines []string) []rule {
	for _, line := range lines {
		line = strings.TrimRight(line, "\r")
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		line = strings.TrimSpace(line)
		neg := strings.HasPrefix(line, "!")
		if neg {
			line = line[1:]
		}
		// git anchors a pattern with a slash before its end to the ignore
		// file's folder; go-gitignore only anchors a leading slash.
		if i := strings.Index(strings.TrimSuffix(line, "/"), "/"); i > 0 && !strings.HasPrefix(line, "**/") {
			line = "/" + line
		}
		rules = append(rules, rule{base: base, m: gitignore.CompileIgnoreLines(line), negate: neg})
	}
	return rules
}

// ignored reports whether rel (slash-separated, relative to the walk root) is
// excluded. Folders are matched with a trailing slash so "build/" only
// matches folders.
func ignored(rules []rule, rel string, dir bool) bool {
	out := false
	for _, r := range rules {
		p := rel
		if r.base != "" {
			if !strings.HasPrefix(rel, r.base+"/") {
				continue
			}
			p = rel[len(r.base)+1:]
		}
		if dir {
			p += "/"
		}
		if r.m.MatchesPath(p) {
			out = !r.negate
		}
	}
	return out
}
