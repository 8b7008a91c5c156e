package app

import (
	"errors"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/config"
)

// TestCheckConfigNamesTheKey: what config cannot check alone (the price
// table, the gateway's patterns, the secret names) is refused as a
// config error naming its key.
func TestCheckConfigNamesTheKey(t *testing.T) {
	for key, set := range map[string]func(*config.Config){
		"gateway.allow":       func(c *config.Config) { c.Gateway.Allow = []string{"hf.co:notaport"} },
		"agent.secret_names":  func(c *config.Config) { c.Agent.SecretNames = []string{"AWS_SECRET_ACCESS_KEY"} },
		"/no/such/prices.yml": func(c *config.Config) { c.Gateway.Prices = "/no/such/prices.yml" },
	} {
		c, err := config.Load("", nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckConfig(c); err != nil {
			t.Fatalf("the defaults: %v", err)
		}
		set(c)
		err = CheckConfig(c)
		var ce *config.Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v; want a config error naming it", key, err)
		}
	}
}
