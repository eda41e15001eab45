package consumer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// labelCase is one case of testdata/labels.json, which fleetpage's Node
// test holds state.js's labels function to as well.
type labelCase struct {
	Name     string            `json:"name"`
	Sessions []LabelOf         `json:"sessions"`
	Want     map[string]string `json:"want"`
}

func TestLabelsGolden(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "labels.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []labelCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 3 {
		t.Fatalf("only %d label cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			got := Labels(c.Sessions)
			if len(got) != len(c.Want) {
				t.Errorf("%d labels, want %d", len(got), len(c.Want))
			}
			seen := map[string]string{}
			for id, want := range c.Want {
				l := got[id].String()
				if l != want {
					t.Errorf("%s: %q, want %q", id, l, want)
				}
				if other, dup := seen[l]; dup {
					t.Errorf("%s and %s share the label %q", id, other, l)
				}
				seen[l] = id
			}
		})
	}
}

func TestProject(t *testing.T) {
	for cwd, want := range map[string]string{
		"/home/ann/acme-shop": "acme-shop", "/home/ann/acme-shop/": "acme-shop", `C:\src\acme-shop`: "acme-shop",
		"~/acme-shop": "acme-shop", "acme-shop": "acme-shop", "/": "", "": "",
	} {
		if got := Project(cwd); got != want {
			t.Errorf("Project(%q) = %q, want %q", cwd, got, want)
		}
	}
}
