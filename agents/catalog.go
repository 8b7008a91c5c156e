// Catalog is a loaded set of definitions.

package agents

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

//go:embed *.yaml
var shipped embed.FS

// Catalog is a loaded set of definitions.
type Catalog struct {
	defs   map[string]*Definition
	source map[string]string
}

// CatalogError is an agents directory or file that cannot be used: a bad
// input, not a failure.
type CatalogError struct{ Msg string }

func (e *CatalogError) Error() string { return e.Msg }

// Load reads the shipped definitions and, when dir is not empty, every
// *.yaml in dir; a file in dir replaces a shipped agent of the same name.
func Load(dir string) (*Catalog, error) {
	c := &Catalog{defs: map[string]*Definition{}, source: map[string]string{}}
	if err := c.addFS(shipped, "agents/"); err != nil {
		return nil, err
	}
	if dir != "" {
		st, err := os.Stat(dir)
		if err != nil || !st.IsDir() {
			return nil, &CatalogError{Msg: fmt.Sprintf("agents.dir: %q is not a readable directory (give a directory of agent definitions, one NAME.yaml each)", dir)}
		}
		if err := c.addFS(os.DirFS(dir), dir+string(filepath.Separator)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Catalog) addFS(fsys fs.FS, label string) error {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return fmt.Errorf("agents: list %s: %w", label, err)
	}
	for _, name := range names {
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return &CatalogError{Msg: fmt.Sprintf("agent file %s%s: %v", label, name, err)}
		}
		d, err := Parse(raw)
		if err != nil {
			return &CatalogError{Msg: fmt.Sprintf("agent file %s%s: %v", label, name, err)}
		}
		if want := strings.TrimSuffix(name, ".yaml"); d.Name != want {
			return &CatalogError{Msg: fmt.Sprintf("agent file %s%s: name %q must match the file name (rename the file %s.yaml or set name: %s)", label, name, d.Name, d.Name, want)}
		}
		c.defs[d.Name], c.source[d.Name] = d, label+name
	}
	return nil
}

// UnknownAgentError names an agent the catalogue does not hold.
type UnknownAgentError struct {
	Name  string
	Known []string
}

func (e *UnknownAgentError) Error() string {
	return fmt.Sprintf("unknown agent %q (known: %s; see `starter agents list`, or add NAME.yaml to agents.dir)", e.Name, strings.Join(e.Known, ", "))
}

// Get returns an agent's definition.
func (c *Catalog) Get(name string) (Definition, error) {
	d, ok := c.defs[name]
	if !ok {
		return Definition{}, &UnknownAgentError{Name: name, Known: c.Names()}
	}
	return *d, nil
}

// Source is the file an agent's definition came from.
func (c *Catalog) Source(name string) string { return c.source[name] }

// Names lists the agents, sorted.
func (c *Catalog) Names() []string {
	out := make([]string, 0, len(c.defs))
	for n := range c.defs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
