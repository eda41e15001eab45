package main

import (
	"bytes"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"text/template"
)

//go:embed formula.rb.tmpl
var formulaText string

var formulaTmpl = template.Must(template.New("formula").Parse(formulaText))

// brewNames are Homebrew's names for the systems and architectures it
// installs on; a platform it has no name for gets no formula entry.
var brewNames = map[string]string{"darwin": "macos", "linux": "linux", "amd64": "intel", "arm64": "arm"}

// built is one archive of the release.
type built struct {
	Platform platform
	Name     string // the archive's file name
	SHA256   string
}

type formulaArch struct{ Brew, URL, SHA256 string }

type formulaSystem struct {
	Brew  string
	Archs []formulaArch
}

// formula renders the Homebrew formula for the archives, which it
// downloads from urlDir (a template of the release's Version).
func formula(src source, urlDir string, archives []built) ([]byte, error) {
	t, err := template.New("url").Parse(urlDir)
	if err != nil {
		return nil, fmt.Errorf("-url: %w", err)
	}
	var dir strings.Builder
	if err := t.Execute(&dir, src); err != nil {
		return nil, fmt.Errorf("-url: %w", err)
	}
	var systems []formulaSystem
	for _, os := range []string{"darwin", "linux"} {
		s := formulaSystem{Brew: brewNames[os]}
		for _, a := range archives {
			if a.Platform.OS == os && brewNames[a.Platform.Arch] != "" {
				s.Archs = append(s.Archs, formulaArch{brewNames[a.Platform.Arch], strings.TrimSuffix(dir.String(), "/") + "/" + a.Name, a.SHA256})
			}
		}
		if len(s.Archs) > 0 {
			systems = append(systems, s)
		}
	}
	if len(systems) == 0 {
		return nil, nil // no platform Homebrew installs on
	}
	quoted := make([]string, len(commands))
	for i, c := range commands {
		quoted[i] = strconv.Quote(c)
	}
	var b bytes.Buffer
	err = formulaTmpl.Execute(&b, map[string]any{"Version": src.Version, "Systems": systems, "Commands": strings.Join(quoted, ", ")})
	return b.Bytes(), err
}
