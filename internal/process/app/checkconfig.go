// CheckConfig checks what config.Validate cannot without the engines that read it (config stays a leaf).

package app

import (
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/sandbox/gateway"
)

// CheckConfig checks what config.Validate cannot without the engines that
// read it (config stays a leaf): the LLM price table, the gateway's
// allow patterns and the secret names runs may ask for. Its errors are
// config errors (exit 2), naming the key.
func CheckConfig(c *config.Config) error {
	if _, err := llm.LoadPrices(c.Gateway.Prices); err != nil {
		return &config.Error{Msg: err.Error()}
	}
	for _, p := range c.Gateway.Allow {
		if err := gateway.CheckPattern(p); err != nil {
			return &config.Error{Msg: "gateway.allow: " + err.Error()}
		}
	}
	for _, n := range c.Agent.SecretNames {
		if err := contract.CheckSecretName(n); err != nil {
			return &config.Error{Msg: "agent.secret_names: " + err.Error()}
		}
	}
	return nil
}
