// Redacted returns the config as YAML with secrets replaced.

package config

import (
	"fmt"
	"reflect"

	"gopkg.in/yaml.v3"
)

// Redacted returns the config as YAML with secrets replaced.
func (c *Config) Redacted() string {
	cp := *c
	redact(reflect.ValueOf(&cp).Elem())
	out, err := yaml.Marshal(&cp)
	if err != nil {
		return fmt.Sprintf("# cannot render config: %v\n", err)
	}
	return string(out)
}

func redact(v reflect.Value) {
	t := v.Type()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.Struct:
			redact(f)
		case t.Field(i).Tag.Get("secret") == "true" && f.Kind() == reflect.String && f.String() != "":
			f.SetString("<redacted>")
		}
	}
}
