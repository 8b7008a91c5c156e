// Package testkit is a wing of internal/: what tests run against.
// s3test (a real S3 server), testenv (the missing-tool rule), llmfake (a
// wire-level OpenAI and Anthropic) and e2e (the end-to-end tests of the
// real binaries). Nothing outside tests and benchmarks imports it; it
// stands beside the house, on no floor.
package testkit
