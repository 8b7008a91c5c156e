package transcript

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/run/llm"
)

// TestReplayServesStrictly: a request as recorded (its clock's values
// aside) gets the recorded answer's bytes; one whose tool result changed
// is refused naming the call and where it differs, and so is every
// call after it.
func TestReplayServesStrictly(t *testing.T) {
	first := `{"model":"gpt-4o","messages":[{"role":"user","content":"Begin. 9m59s left until the deadline (2026-12-02T06:33:59Z)."}]}`
	second := `{"model":"gpt-4o","messages":[{"role":"user","content":"Begin."},{"role":"assistant","tool_calls":[{"id":"c1"}]},{"role":"tool","content":"validation=41.2"}]}`
	r := &Replayer{source: "run-a", calls: []exchange{
		{call: Call{Seq: 1, Attempt: 1, API: llm.ChatCompletions, Stream: true}, req: []byte(first), resp: []byte("data: one\n\n")},
		{call: Call{Seq: 2, Attempt: 1, API: llm.ChatCompletions}, req: []byte(second), resp: []byte(`{"two":2}`)},
	}}
	srv := httptest.NewServer(r)
	defer srv.Close()
	post := func(body string) (int, string) {
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	again := strings.Replace(strings.Replace(first, "9m59s", "2h3m4.5s", 1), "2026-12-02T06:33:59Z", "2027-01-01T00:00:00.123+01:00", 1)
	if code, body := post(again); code != 200 || body != "data: one\n\n" {
		t.Fatalf("the first call, its clock moved: %d %q", code, body)
	}
	code, body := post(strings.Replace(second, "41.2", "40.9", 1))
	if code != 400 || !strings.Contains(body, "replay: call 2 of 2 (run run-a, attempt 1, seq 2, openai.chat.completions): the request differs from the recorded one at $.messages[2].content") ||
		!strings.Contains(body, `validation=40.9`) {
		t.Fatalf("a changed tool result: %d %s", code, body)
	}
	if code, _ := post(second); code != 400 || r.Served() != 1 || r.Err() == nil {
		t.Fatalf("after a refusal the replay stays refused: %d, served %d", code, r.Served())
	}
}
