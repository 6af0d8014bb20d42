package images

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// AptDir is where this machine's apt is told where Debian's archives are.
const AptDir = "/etc/apt"

// aptSource is one archive apt knows: a URI and the suites it serves.
type aptSource struct {
	uri    string
	suites []string
}

// MirrorsFromApt reads apt's configuration under dir (sources.list, and
// sources.list.d/*.list and *.sources) and returns the archive serving
// suite and the one serving suite-security, "" where none does. The
// image builds use the same archives as the machine, named nowhere else.
func MirrorsFromApt(dir, suite string) (mirror, security string) {
	var all []aptSource
	files := []string{filepath.Join(dir, "sources.list")}
	for _, pattern := range []string{"*.list", "*.sources"} {
		more, _ := filepath.Glob(filepath.Join(dir, "sources.list.d", pattern))
		files = append(files, more...)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if strings.HasSuffix(f, ".sources") {
			all = append(all, parseDeb822(string(data))...)
		} else {
			all = append(all, parseOneLine(string(data))...)
		}
	}
	for _, s := range all {
		if mirror == "" && slices.Contains(s.suites, suite) {
			mirror = s.uri
		}
		if security == "" && slices.Contains(s.suites, suite+"-security") {
			security = s.uri
		}
	}
	return mirror, security
}

// parseOneLine reads "deb [options] URI suite component…" lines.
func parseOneLine(text string) []aptSource {
	var out []aptSource
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) > 0 {
				f = f[1:]
			}
		}
		if len(f) >= 2 {
			out = append(out, aptSource{uri: strings.TrimSuffix(f[0], "/"), suites: []string{f[1]}})
		}
	}
	return out
}

// parseDeb822 reads the stanzas of a .sources file.
func parseDeb822(text string) []aptSource {
	var out []aptSource
	for _, stanza := range strings.Split(text, "\n\n") {
		fields := map[string]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if ok {
				fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
		if !slices.Contains(strings.Fields(fields["types"]), "deb") || strings.EqualFold(fields["enabled"], "no") {
			continue
		}
		for _, uri := range strings.Fields(fields["uris"]) {
			out = append(out, aptSource{uri: strings.TrimSuffix(uri, "/"), suites: strings.Fields(fields["suites"])})
		}
	}
	return out
}
