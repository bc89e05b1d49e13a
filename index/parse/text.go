package parse

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"
)

// decodeText returns b as UTF-8 and the name of the encoding it came in ("" for
// UTF-8). UTF-8 (with or without BOM) and UTF-16 with a BOM are decoded
// exactly. Other bytes are taken as Windows-1252 (a superset of Latin-1's
// printable range, and what most non-UTF-8 Western text files are) when they
// look like it: no bytes that Windows-1252 leaves undefined and few high
// bytes. Anything else, such as Shift-JIS or GBK where most bytes are high,
// fails with ErrEncoding rather than being indexed as mojibake.
func decodeText(b []byte) (string, string, error) {
	switch {
	case bytes.HasPrefix(b, []byte{0xEF, 0xBB, 0xBF}):
		b = b[3:]
	case bytes.HasPrefix(b, []byte{0xFF, 0xFE}), bytes.HasPrefix(b, []byte{0xFE, 0xFF}):
		name, end := "utf-16le", unicode.LittleEndian
		if b[0] == 0xFE {
			name, end = "utf-16be", unicode.BigEndian
		}
		out, err := unicode.UTF16(end, unicode.ExpectBOM).NewDecoder().Bytes(b)
		if err != nil {
			return "", "", fmt.Errorf("%w: bad %s: %v", ErrEncoding, name, err)
		}
		return string(out), name, nil
	}
	if utf8.Valid(b) {
		if bytes.IndexByte(b, 0) >= 0 {
			return "", "", fmt.Errorf("%w: binary data (NUL bytes) in a text file", ErrUnsupported)
		}
		return string(b), "", nil
	}
	high, text := 0, 0
	for _, c := range b {
		switch {
		case c == 0:
			return "", "", fmt.Errorf("%w: binary data (NUL bytes) in a text file", ErrUnsupported)
		case c == 0x81 || c == 0x8D || c == 0x8F || c == 0x90 || c == 0x9D:
			return "", "", fmt.Errorf("%w: not UTF-8, and byte 0x%02X rules out Windows-1252", ErrEncoding, c)
		case c >= 0x80:
			high++
			text++
		case c > ' ':
			text++
		}
	}
	if high*10 > text*3 {
		return "", "", fmt.Errorf("%w: not UTF-8, and too many high bytes (%d of %d) for Latin-1/Windows-1252", ErrEncoding, high, text)
	}
	out, err := charmap.Windows1252.NewDecoder().Bytes(b)
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrEncoding, err)
	}
	return string(out), "windows-1252", nil
}

// lines splits text into lines without their "\n" or "\r\n".
func lines(text string) []string {
	ls := strings.Split(text, "\n")
	if n := len(ls); n > 0 && ls[n-1] == "" {
		ls = ls[:n-1] // a final newline ends the last line rather than starting one
	}
	for i, l := range ls {
		ls[i] = strings.TrimSuffix(l, "\r")
	}
	return ls
}

// section makes a Section of lines[from:to] (0-based, exclusive), trimmed of
// blank lines at either end. ok is false when nothing but blanks is left.
func section(ls []string, from, to int, heading string) (Section, bool) {
	for from < to && strings.TrimSpace(ls[from]) == "" {
		from++
	}
	for to > from && strings.TrimSpace(ls[to-1]) == "" {
		to--
	}
	if from == to {
		return Section{}, false
	}
	return Section{
		Text:      strings.Join(ls[from:to], "\n"),
		Heading:   heading,
		LineStart: from + 1,
		LineEnd:   to,
	}, true
}

func baseTitle(path string) string {
	b := filepath.Base(path)
	if t := strings.TrimSuffix(b, filepath.Ext(b)); t != "" {
		return t
	}
	return b
}

func parseText(text, path string) *Doc {
	doc := &Doc{Parser: kindText, Title: baseTitle(path)}
	ls := lines(text)
	if s, ok := section(ls, 0, len(ls), manName(ls)); ok {
		doc.Sections = append(doc.Sections, s)
	}
	return doc
}

// A manual page rendered to text (man, col -b) opens with a line naming the page and its
// section at both ends, "LS(1)   User Commands   LS(1)", and its section headings are
// lines in capitals at the margin, the first of them "NAME".
var (
	manHeaderRe  = regexp.MustCompile(`^(\S+)\(([0-9][0-9A-Za-z]*)\)\s.*\s(\S+)\(([0-9][0-9A-Za-z]*)\)$`)
	manSectionRe = regexp.MustCompile(`^[A-Z][A-Z0-9 ,/&()'-]*[A-Z)]$`)
)

// maxManName bounds the heading a manual page's NAME section gives, in bytes.
const maxManName = 200

// manName returns what a manual page rendered to text says it is, its NAME section on
// one line ("ls - list directory contents"), or "" when the text is not one. It becomes
// the heading of the page's text, so every chunk of the page carries the words that say
// what the page is for, as a Markdown document's title does. Measured on the sysman
// set (eval/): recall@5 0.738 → 0.784, MRR 0.598 → 0.606; cutting the page into its
// sections as well, with or without "NAME > OPTIONS" paths, did worse (recall@5 0.742).
func manName(ls []string) string {
	first := 0
	for first < len(ls) && strings.TrimSpace(ls[first]) == "" {
		first++
	}
	if first == len(ls) {
		return ""
	}
	m := manHeaderRe.FindStringSubmatch(strings.TrimSpace(ls[first]))
	if m == nil || !strings.EqualFold(m[1], m[3]) || m[2] != m[4] {
		return ""
	}
	i := first + 1
	for i < len(ls) && strings.TrimSpace(ls[i]) == "" {
		i++
	}
	if i == len(ls) || strings.TrimRight(ls[i], " \t") != "NAME" {
		return ""
	}
	var words []string
	for i++; i < len(ls); i++ {
		if manSectionRe.MatchString(strings.TrimRight(ls[i], " \t")) {
			break
		}
		words = append(words, strings.Fields(ls[i])...)
	}
	name := strings.Join(words, " ")
	if len(name) > maxManName {
		name = strings.ToValidUTF8(name[:maxManName], "")
	}
	return name
}

// parseCode keeps source as text with line ranges; blank lines between
// blocks are what the chunker splits on.
func parseCode(text, path string) *Doc {
	doc := &Doc{Parser: kindCode, Lang: langOf(path), Title: filepath.Base(path)}
	ls := lines(text)
	if s, ok := section(ls, 0, len(ls), ""); ok {
		doc.Sections = append(doc.Sections, s)
	}
	return doc
}

// langOf names the programming or data language of a file, "" for prose.
func langOf(path string) string {
	base := filepath.Base(path)
	switch strings.ToLower(base) {
	case "makefile", "gnumakefile":
		return "Makefile"
	case "dockerfile", "containerfile":
		return "Dockerfile"
	case "cmakelists.txt":
		return "CMake"
	case "jenkinsfile":
		return "Groovy"
	}
	return langs[strings.ToLower(filepath.Ext(base))]
}

var langs = map[string]string{
	".go": "Go", ".py": "Python", ".pyi": "Python", ".js": "JavaScript", ".mjs": "JavaScript",
	".cjs": "JavaScript", ".jsx": "JavaScript", ".ts": "TypeScript", ".tsx": "TypeScript",
	".java": "Java", ".kt": "Kotlin", ".kts": "Kotlin", ".scala": "Scala", ".groovy": "Groovy",
	".c": "C", ".h": "C", ".cc": "C++", ".cpp": "C++", ".cxx": "C++", ".hpp": "C++", ".hh": "C++",
	".cs": "C#", ".fs": "F#", ".rs": "Rust", ".rb": "Ruby", ".php": "PHP", ".swift": "Swift",
	".m": "Objective-C", ".mm": "Objective-C", ".dart": "Dart", ".lua": "Lua", ".pl": "Perl",
	".pm": "Perl", ".r": "R", ".jl": "Julia", ".hs": "Haskell", ".ml": "OCaml", ".ex": "Elixir",
	".exs": "Elixir", ".erl": "Erlang", ".clj": "Clojure", ".el": "Emacs Lisp", ".lisp": "Lisp",
	".scm": "Scheme", ".zig": "Zig", ".nim": "Nim", ".v": "V", ".sol": "Solidity",
	".sh": "Shell", ".bash": "Shell", ".zsh": "Shell", ".fish": "Shell", ".ps1": "PowerShell",
	".bat": "Batch", ".cmd": "Batch", ".sql": "SQL", ".proto": "Protocol Buffers",
	".graphql": "GraphQL", ".gql": "GraphQL", ".tf": "Terraform", ".hcl": "HCL", ".nix": "Nix",
	".vue": "Vue", ".svelte": "Svelte", ".css": "CSS", ".scss": "SCSS", ".sass": "Sass",
	".less": "Less", ".json": "JSON", ".jsonc": "JSON", ".yaml": "YAML", ".yml": "YAML",
	".toml": "TOML", ".xml": "XML", ".ini": "INI", ".cfg": "INI", ".conf": "Config",
	".gradle": "Groovy", ".cmake": "CMake", ".mk": "Makefile", ".asm": "Assembly", ".s": "Assembly",
	".ipynb": "Jupyter",
}
