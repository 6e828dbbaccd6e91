package wheel

import (
	"fmt"
	"strconv"
	"strings"
)

// Target is what an image can run: Python "3.11", Arch "x86_64" or
// "aarch64", Glibc "2.36" ("" = no glibc known: only pure wheels, no
// manylinux).
type Target struct{ Python, Arch, Glibc string }

// Choose picks the best wheel among candidate file names (all of one version)
// for t, in pip's preference order (packaging.tags.sys_tags for CPython):
// cp311-cp311 > cp311-abi3 > cp311-none > cp310-abi3 ... cp32-abi3 >
// py311/py3/py310...-none-<platform> > cp311-none-any > py311/py3/...-none-any,
// each with the newest fitting manylinux first. Ties go to the higher build
// tag, then to the earlier file. best is -1 when none fits; why[i] says in one
// short phrase why file i does not fit ("" for those that fit).
func Choose(t Target, files []string) (best int, why []string) {
	why = make([]string, len(files))
	best = -1
	bestPrio := 0
	var bestBuild string
	tg, err := parseTarget(t)
	for i, fn := range files {
		if err != nil {
			why[i] = err.Error()
			continue
		}
		f, perr := ParseFilename(fn)
		if perr != nil {
			why[i] = notWheel(fn)
			continue
		}
		prio, reason := tg.fit(f.Tags)
		if prio < 0 {
			why[i] = reason
			continue
		}
		if best < 0 || prio < bestPrio || (prio == bestPrio && buildLess(bestBuild, f.Build)) {
			best, bestPrio, bestBuild = i, prio, f.Build
		}
	}
	return best, why
}

func notWheel(fn string) string {
	l := strings.ToLower(fn)
	for _, ext := range []string{".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar", ".zip"} {
		if strings.HasSuffix(l, ext) {
			return "a source distribution"
		}
	}
	if strings.HasSuffix(l, ".egg") {
		return "an egg, not a wheel"
	}
	if strings.HasSuffix(l, ".whl") {
		return "not a valid wheel file name"
	}
	return "not a wheel"
}

// buildLess reports whether build tag a sorts before b (PEP 427: by the
// leading number, then the rest as a string; no build tag sorts first).
func buildLess(a, b string) bool {
	split := func(s string) (int, string, bool) {
		if s == "" {
			return 0, "", false
		}
		j := 0
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		n, _ := strconv.Atoi(s[:j])
		return n, s[j:], true
	}
	an, as, aok := split(a)
	bn, bs, bok := split(b)
	if aok != bok {
		return !aok
	}
	if an != bn {
		return an < bn
	}
	return as < bs
}

type target struct {
	minor int    // CPython 3.<minor>
	arch  string // x86_64, aarch64
	glibc int    // 2.<glibc>, -1 when unknown
	gstr  string
}

func parseTarget(t Target) (target, error) {
	var tg target
	maj, min, ok := twoInts(t.Python)
	if !ok || maj != 3 {
		return tg, fmt.Errorf("the target Python %q is not a CPython 3 version", t.Python)
	}
	tg.minor = min
	tg.arch = t.Arch
	if tg.arch == "" {
		return tg, fmt.Errorf("the target has no architecture")
	}
	tg.glibc = -1
	if t.Glibc != "" {
		gm, gn, ok := twoInts(t.Glibc)
		if !ok || gm != 2 {
			return tg, fmt.Errorf("the target glibc %q is not a 2.N version", t.Glibc)
		}
		tg.glibc = gn
		tg.gstr = t.Glibc
	}
	return tg, nil
}

func twoInts(s string) (int, int, bool) {
	a, b, ok := strings.Cut(s, ".")
	if !ok {
		return 0, 0, false
	}
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || x < 0 || y < 0 {
		return 0, 0, false
	}
	return x, y, true
}

// Priority blocks are spaced by this much; the platform index (how far
// below the base's glibc a manylinux tag is) goes inside a block.
const blockSize = 1000

// fit returns the best (lowest) priority among tags, or -1 and the reason of
// the tag that came closest to fitting.
func (tg target) fit(tags []Tag) (int, string) {
	best := -1
	reason, stage := "", -1
	for _, t := range tags {
		p, st, r := tg.tagPrio(t)
		if p >= 0 {
			if best < 0 || p < best {
				best = p
			}
			continue
		}
		if st > stage {
			stage, reason = st, r
		}
	}
	if best >= 0 {
		return best, ""
	}
	return -1, reason
}

// tagPrio returns the priority of one tag (lower is better), or -1 with the
// stage reached (0 interpreter, 1 ABI, 2 platform) and why it does not fit.
func (tg target) tagPrio(t Tag) (prio, stage int, why string) {
	impl, major, minor, ok := splitPython(t.Python)
	if !ok {
		return -1, 0, "for interpreter " + t.Python
	}
	M := tg.minor
	isAny := t.Platform == "any"
	// Block numbers follow packaging.tags: cpython_tags then compatible_tags.
	pyBlock1 := 3 + M         // py3x-none-<platform>
	cpAny := pyBlock1 + M + 2 // cp3M-none-any
	pyBlock2 := cpAny + 1     // py3x-none-any
	block := -1
	switch impl {
	case "cp":
		switch {
		case major != 3 || minor < 0:
			return -1, 0, "for CPython " + pyVersion(major, minor)
		case minor == M:
			switch t.ABI {
			case fmt.Sprintf("cp3%d", M):
				block = 0
			case "abi3":
				block = 1
			case "none":
				block = 2
				if isAny {
					block = cpAny
				}
			default:
				return -1, 1, "for ABI " + t.ABI
			}
			if isAny && t.ABI != "none" {
				return -1, 2, "for platform any with ABI " + t.ABI + " (pip does not install this)"
			}
		case minor < M && minor >= 2 && t.ABI == "abi3":
			if isAny {
				return -1, 2, "for platform any with ABI abi3 (pip does not install this)"
			}
			block = 3 + (M - 1 - minor)
		default:
			return -1, 0, "for CPython " + pyVersion(major, minor)
		}
	case "py":
		if major != 3 || minor > M {
			return -1, 0, "for Python " + pyVersion(major, minor)
		}
		if t.ABI != "none" {
			return -1, 1, "for ABI " + t.ABI
		}
		order := 1 // py3
		switch {
		case minor == M:
			order = 0
		case minor >= 0:
			order = 2 + (M - 1 - minor)
		}
		block = pyBlock1 + order
		if isAny {
			block = pyBlock2 + order
		}
	case "pp":
		return -1, 0, "for PyPy"
	case "ip":
		return -1, 0, "for IronPython"
	case "jy":
		return -1, 0, "for Jython"
	case "gp":
		return -1, 0, "for GraalPy"
	default:
		return -1, 0, "for interpreter " + t.Python
	}
	if isAny {
		return block * blockSize, 0, ""
	}
	idx, why := tg.platformIndex(t.Platform)
	if idx < 0 {
		return -1, 2, why
	}
	return block*blockSize + idx, 0, ""
}

// splitPython splits "cp311" into ("cp", 3, 11) and "py3" into ("py", 3, -1).
func splitPython(s string) (impl string, major, minor int, ok bool) {
	i := 0
	for i < len(s) && s[i] >= 'a' && s[i] <= 'z' {
		i++
	}
	impl, digits := s[:i], s[i:]
	if impl == "" {
		return "", 0, 0, false
	}
	if digits == "" {
		return impl, -1, -1, true
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return impl, -1, -1, true
		}
	}
	major = int(digits[0] - '0')
	minor = -1
	if len(digits) > 1 {
		minor, _ = strconv.Atoi(digits[1:])
	}
	return impl, major, minor, true
}

func pyVersion(major, minor int) string {
	switch {
	case major < 0:
		return "(unknown version)"
	case minor < 0:
		return strconv.Itoa(major)
	}
	return fmt.Sprintf("%d.%d", major, minor)
}

// platformIndex orders manylinux tags by how far below the base's glibc
// they are (0 = newest, preferred), or returns -1 and why the platform does
// not fit.
func (tg target) platformIndex(plat string) (int, string) {
	switch {
	case strings.HasPrefix(plat, "manylinux"):
		gmaj, gmin, arch, ok := parseManylinux(plat)
		if !ok {
			return -1, "for platform " + plat
		}
		if arch != tg.arch {
			return -1, "for " + arch
		}
		if tg.glibc < 0 {
			return -1, fmt.Sprintf("needs glibc %d.%d, the base has no glibc known", gmaj, gmin)
		}
		if gmaj != 2 || gmin > tg.glibc {
			return -1, fmt.Sprintf("needs glibc %d.%d, the base has %s", gmaj, gmin, tg.gstr)
		}
		// pip lists the legacy alias (manylinux2014) right after the
		// manylinux_2_N tag of the same glibc.
		idx := 2 * (tg.glibc - gmin)
		if !strings.HasPrefix(plat, "manylinux_") {
			idx++
		}
		return idx, ""
	case strings.HasPrefix(plat, "musllinux"):
		return -1, "for musl libc (musllinux)"
	case strings.HasPrefix(plat, "linux_"):
		return -1, "for " + plat + ", not manylinux (built for one machine)"
	case strings.HasPrefix(plat, "win"):
		return -1, "for Windows"
	case strings.HasPrefix(plat, "macosx"):
		return -1, "for macOS"
	}
	return -1, "for platform " + plat
}

// parseManylinux reads manylinux_X_Y_arch and the legacy aliases
// manylinux1 (2.5), manylinux2010 (2.12) and manylinux2014 (2.17).
func parseManylinux(plat string) (gmaj, gmin int, arch string, ok bool) {
	for _, l := range []struct {
		prefix string
		min    int
	}{{"manylinux1_", 5}, {"manylinux2010_", 12}, {"manylinux2014_", 17}} {
		if a, found := strings.CutPrefix(plat, l.prefix); found && a != "" {
			return 2, l.min, a, true
		}
	}
	rest, found := strings.CutPrefix(plat, "manylinux_")
	if !found {
		return 0, 0, "", false
	}
	parts := strings.SplitN(rest, "_", 3)
	if len(parts) != 3 || parts[2] == "" {
		return 0, 0, "", false
	}
	x, err1 := strconv.Atoi(parts[0])
	y, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return 0, 0, "", false
	}
	return x, y, parts[2], true
}
