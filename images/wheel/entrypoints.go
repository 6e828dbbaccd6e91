package wheel

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// entryPoint is one console or GUI script to generate.
type entryPoint struct {
	Name, Module, Attr string
}

var (
	// distlib's ENTRY_RE name part: word characters, '-', '.', '+'.
	epNameRe  = regexp.MustCompile(`^[A-Za-z0-9_.+-]+$`)
	dottedRe  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	epExtraRe = regexp.MustCompile(`^\[[A-Za-z0-9_,=\s-]*\]$`)
)

var pyKeywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true,
	"async": true, "await": true, "break": true, "class": true, "continue": true,
	"def": true, "del": true, "elif": true, "else": true, "except": true,
	"finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true,
	"not": true, "or": true, "pass": true, "raise": true, "return": true,
	"try": true, "while": true, "with": true, "yield": true,
}

func validDotted(s string) bool {
	if !dottedRe.MatchString(s) {
		return false
	}
	for _, p := range strings.Split(s, ".") {
		if pyKeywords[p] {
			return false
		}
	}
	return true
}

// parseEntryPoints reads the [console_scripts] and [gui_scripts] sections of
// entry_points.txt (an INI file, '=' the only delimiter as importlib.metadata
// reads it). Script names must be unique across both sections.
func parseEntryPoints(data []byte) ([]entryPoint, error) {
	var eps []entryPoint
	seen := map[string]bool{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		raw := sc.Text()
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			if !strings.HasSuffix(line, "]") {
				return nil, fmt.Errorf("entry_points.txt line %d: bad section header %q", lineNo, line)
			}
			section = strings.TrimSpace(line[1 : len(line)-1])
			continue
		}
		if section != "console_scripts" && section != "gui_scripts" {
			continue
		}
		if raw[0] == ' ' || raw[0] == '\t' {
			return nil, fmt.Errorf("entry_points.txt line %d: continuation lines are not allowed in [%s]", lineNo, section)
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("entry_points.txt line %d: %q is not name = module:function", lineNo, line)
		}
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if name == "" || name == "." || name == ".." || !epNameRe.MatchString(name) {
			return nil, fmt.Errorf("entry_points.txt line %d: invalid script name %q", lineNo, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("entry_points.txt line %d: script %q is defined twice", lineNo, name)
		}
		seen[name] = true
		target := value
		if i := strings.IndexByte(value, '['); i >= 0 {
			if !epExtraRe.MatchString(strings.TrimSpace(value[i:])) {
				return nil, fmt.Errorf("entry_points.txt line %d: bad extras in %q", lineNo, value)
			}
			target = strings.TrimSpace(value[:i])
		}
		mod, attr, ok := strings.Cut(target, ":")
		if !ok || attr == "" {
			return nil, fmt.Errorf("entry_points.txt line %d: script %q: %q has no callable (module:function is required)", lineNo, name, value)
		}
		if !validDotted(mod) || !validDotted(attr) {
			return nil, fmt.Errorf("entry_points.txt line %d: script %q: %q is not module:function", lineNo, name, value)
		}
		eps = append(eps, entryPoint{Name: name, Module: mod, Attr: attr})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("entry_points.txt: %w", err)
	}
	return eps, nil
}

// scriptText is the script pip generates (distlib's SCRIPT_TEMPLATE) with a
// simple shebang for the image's interpreter.
func scriptText(interpreter string, ep entryPoint) []byte {
	importName, _, _ := strings.Cut(ep.Attr, ".")
	return []byte("#!" + interpreter + "\n" +
		"# -*- coding: utf-8 -*-\n" +
		"import re\n" +
		"import sys\n" +
		"from " + ep.Module + " import " + importName + "\n" +
		"if __name__ == '__main__':\n" +
		"    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n" +
		"    sys.exit(" + ep.Attr + "())\n")
}
