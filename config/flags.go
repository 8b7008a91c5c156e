// AddFlags declares on fs the flags of the keys named, each from its Table row.

package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// AddFlags declares on fs the flags of the keys named, each from its
// Table row: its name (Key.Flag), its type (its default's), its help
// (Key.Doc, the key and its default) and no default of its own, so that
// a flag left unset leaves the key to the file, the environment and the
// table. A key with no flag in Table is a programming error.
func AddFlags(fs *pflag.FlagSet, keys ...string) {
	for _, name := range keys {
		k, ok := Lookup(name)
		if !ok || k.Flag == "" {
			panic(fmt.Sprintf("config.AddFlags: key %q has no flag in config.Table", name))
		}
		doc := strings.ReplaceAll(k.Doc, "`", "") // pflag reads a backquoted word as the value's name
		fs.Var(&keyFlag{key: k.Name, kind: kindOf(k.Default)}, k.Flag, fmt.Sprintf("%s (config %s; default %s)", doc, k.Name, strings.Trim(k.Shown(), "`")))
	}
}

// Lookup finds a key of Table by name.
func Lookup(name string) (Key, bool) {
	for _, k := range Table {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

// keyFlag is a key's flag: checked against the key's type as it is set
// (a bad value is a usage error naming the flag), handed to viper as text.
type keyFlag struct {
	key, kind, val string
}

// FlagKey is the key a flag sets when AddFlags declared it.
func FlagKey(f *pflag.Flag) (string, bool) {
	k, ok := f.Value.(*keyFlag)
	if !ok {
		return "", false
	}
	return k.key, true
}

func (f *keyFlag) String() string { return f.val }
func (f *keyFlag) Type() string   { return f.kind }

func (f *keyFlag) Set(s string) error {
	var err error
	switch f.kind {
	case "int":
		_, err = strconv.ParseInt(s, 10, 64)
	case "float64":
		_, err = strconv.ParseFloat(s, 64)
	case "bool":
		_, err = strconv.ParseBool(s)
	case "duration":
		_, err = time.ParseDuration(s)
	}
	if err != nil {
		return fmt.Errorf("%q is not a %s", s, f.kind)
	}
	f.val = s
	return nil
}

// kindOf is the flag type of a key whose default is v, named as viper
// reads a flag's value by its type.
func kindOf(v any) string {
	switch v.(type) {
	case int, int64:
		return "int"
	case float64:
		return "float64"
	case bool:
		return "bool"
	case time.Duration:
		return "duration"
	}
	return "string"
}
