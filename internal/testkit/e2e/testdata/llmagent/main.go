// Command llmagent is an MLRB-contract agent image that does its research
// through LLM calls (its chat calls to the model MLRB_MODEL names): the
// official OpenAI and Anthropic SDKs, unmodified,
// with the keys MLRB's agent reads (OPENAI, ANTHROPIC) and the base URLs
// the SDKs read from the environment. It prints the SHA-256 of each
// answer's bytes as it received them, then submits a trivial model.
package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// n numbers the answers in the order their bodies end.
var n int

// hashed hashes an answer's bytes and prints the sum once the body is
// done: at its end, or when the SDK closes it (a stream's reader may stop
// at its last event and close before reading the end; what is left is
// read then, so the sum is of every byte the answer brought).
type hashed struct {
	io.ReadCloser
	h    hash.Hash
	done bool
}

func (h *hashed) Read(p []byte) (int, error) {
	k, err := h.ReadCloser.Read(p)
	h.h.Write(p[:k])
	if err == io.EOF {
		h.print()
	}
	return k, err
}

func (h *hashed) Close() error {
	if !h.done {
		_, _ = io.Copy(h.h, h.ReadCloser)
		h.print()
	}
	return h.ReadCloser.Close()
}

func (h *hashed) print() {
	if h.done {
		return
	}
	h.done = true
	n++
	fmt.Printf("answer %d sha256 %x\n", n, h.h.Sum(nil))
}

func middleware(r *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	resp, err := next(r)
	if err == nil {
		resp.Body = &hashed{ReadCloser: resp.Body, h: sha256.New()}
	}
	return resp, err
}

func main() {
	if err := research(context.Background()); err != nil {
		fmt.Println("llm call failed:", err)
		os.Exit(1)
	}
	out := os.Getenv("MLRB_OUTPUT_DIR")
	dir := filepath.Join(out, "model")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	_ = os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type":"mlrb-ngram","order":1,"num_parameters":1,"torch_dtype":"float32"}`), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "model.json"), []byte(`{"order":1,"lambda":0.5,"vocab":["."],"counts":{"|.":1}}`), 0o644)
	_ = os.WriteFile(filepath.Join(out, "submission.json"), []byte(`{"model_path":"output/model"}`), 0o644)
	fmt.Println("model saved")
}

func research(ctx context.Context) error {
	oc := openai.NewClient(ooption.WithAPIKey(os.Getenv("OPENAI")), ooption.WithMiddleware(middleware), ooption.WithMaxRetries(0))
	ac := anthropic.NewClient(aoption.WithAPIKey(os.Getenv("ANTHROPIC")), aoption.WithMiddleware(middleware), aoption.WithMaxRetries(0))
	// The model its definition names (MLRB_MODEL), as an agent under
	// comparison would use it; gpt-4o for a one-off run.
	model := os.Getenv("MLRB_MODEL")
	if model == "" {
		model = "gpt-4o"
	}
	chat := openai.ChatCompletionNewParams{Model: model, MaxCompletionTokens: openai.Int(512),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Propose a baseline for " + os.Getenv("TASK_NAME"))}}
	if _, err := oc.Chat.Completions.New(ctx, chat); err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	st := oc.Chat.Completions.NewStreaming(ctx, chat)
	for st.Next() {
	}
	if st.Err() != nil {
		return fmt.Errorf("chat stream: %w", st.Err())
	}
	rs := oc.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-4o-mini", MaxOutputTokens: openai.Int(512),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Critique the baseline")}})
	for rs.Next() {
	}
	if rs.Err() != nil {
		return fmt.Errorf("responses stream: %w", rs.Err())
	}
	msg := anthropic.MessageNewParams{Model: "claude-3-5-sonnet-20241022", MaxTokens: 512,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Plan the next experiment"))}}
	if _, err := ac.Messages.New(ctx, msg); err != nil {
		return fmt.Errorf("messages: %w", err)
	}
	as := ac.Messages.NewStreaming(ctx, msg)
	for as.Next() {
	}
	if as.Err() != nil {
		return fmt.Errorf("messages stream: %w", as.Err())
	}
	return nil
}
