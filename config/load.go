// Loading the config: defaults < file < env < flags.

package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"gopkg.in/yaml.v3"
)

// Loading: defaults < file < MLRB_* env < flags, every key checked.

// Keys lists every config key, sorted.
func Keys() []string {
	d := defaults()
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// EnvName is the environment variable for a key, the viper way.
func EnvName(key string) string {
	return "MLRB_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Load builds the Config. file may be empty (then MLRB_CONFIG, then
// ./mlrb.yaml if present). flags may be nil; the flags in flagKeys (flag
// name -> key) win over everything. cmdDefaults (key -> value) replace
// built-in defaults for one command and lose to file, env and flags.
func Load(file string, flags *pflag.FlagSet, flagKeys map[string]string, cmdDefaults map[string]string) (*Config, error) {
	v := viper.New()
	for k, val := range defaults() {
		v.SetDefault(k, val)
	}
	for k, val := range cmdDefaults {
		v.SetDefault(k, val)
	}
	v.SetEnvPrefix("MLRB")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	if file == "" {
		file = os.Getenv("MLRB_CONFIG")
	}
	if file == "" {
		if _, err := os.Stat("mlrb.yaml"); err == nil {
			file = "mlrb.yaml"
		}
	}
	if file != "" {
		if err := readFile(v, file); err != nil {
			return nil, err
		}
	}
	if flags != nil {
		for flagName, key := range flagKeys {
			f := flags.Lookup(flagName)
			if f == nil {
				continue
			}
			if err := v.BindPFlag(key, f); err != nil {
				return nil, fmt.Errorf("config: bind flag --%s: %w", flagName, err)
			}
		}
	}
	if err := checkDurations(v); err != nil {
		return nil, err
	}
	var c Config
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:           &c,
		WeaklyTypedInput: true,
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			splitList,
		),
	})
	if err != nil {
		return nil, fmt.Errorf("config: decoder: %w", err)
	}
	if err := dec.Decode(v.AllSettings()); err != nil {
		return nil, &Error{Msg: fmt.Sprintf("config: %v", err)}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// splitList reads a list given as one string (an environment variable:
// "0,1", "[0, 1]", "a,b") into its elements, for a list of any element
// type; the decoder then converts each element.
func splitList(f, t reflect.Type, data any) (any, error) {
	if f.Kind() != reflect.String || t.Kind() != reflect.Slice {
		return data, nil
	}
	s := strings.TrimSpace(data.(string))
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if s == "" {
		return []string{}, nil
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts, nil
}

// readFile merges a YAML file and rejects keys mlrb does not know: a typo
// silently ignored would run a 24 h job with the wrong settings.
func readFile(v *viper.Viper, file string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return &Error{Msg: fmt.Sprintf("config file %s: %v (fix the path given to --config or MLRB_CONFIG)", file, unwrapPath(err))}
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return &Error{Msg: fmt.Sprintf("config file %s is not valid YAML: %v", file, err)}
	}
	known := map[string]bool{}
	for _, k := range Keys() {
		parts := strings.Split(k, ".")
		for i := range parts {
			known[strings.Join(parts[:i+1], ".")] = true
		}
	}
	if err := checkKeys(m, "", known); err != nil {
		return &Error{Msg: fmt.Sprintf("config file %s: %v", file, err)}
	}
	if err := v.MergeConfigMap(m); err != nil {
		return fmt.Errorf("config file %s: %w", file, err)
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// moved are keys renamed since a release: a config that still uses one
// is told the new name.
var moved = map[string]string{"agent.egress": "gateway.allow"}

func checkKeys(m map[string]any, prefix string, known map[string]bool) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		full := k
		if prefix != "" {
			full = prefix + "." + k
		}
		if to, ok := moved[full]; ok {
			return fmt.Errorf("config key %q is now %q: rename it", full, to)
		}
		if !known[full] {
			return fmt.Errorf("unknown config key %q (known keys: see `starter config show`)", full)
		}
		if sub, ok := m[k].(map[string]any); ok {
			if err := checkKeys(sub, full, known); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkDurations(v *viper.Viper) error {
	for _, k := range Keys() {
		if !durationKey(k) {
			continue
		}
		s := v.GetString(k)
		d, err := time.ParseDuration(s)
		if err != nil {
			return &Error{Msg: fmt.Sprintf("%s: %q is not a duration (write it like 90s, 10m or 24h; env %s)", k, s, EnvName(k))}
		}
		if d <= 0 {
			return &Error{Msg: fmt.Sprintf("%s: %q must be positive (env %s)", k, s, EnvName(k))}
		}
	}
	return nil
}
