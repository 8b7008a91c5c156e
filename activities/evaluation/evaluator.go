// evaluatorName names the evaluator that ran spec (the task's command template).

package evaluation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/scoring/reference"
)

// evaluatorName names the evaluator that ran spec (the task's command
// template): its image's digest, or its binary's hash; for the reference
// evaluator ({self} reference-eval), the name it gives its scoring code
// (`reference-eval --name`), asked once per image or binary. Any build
// that scores alike, as a process or in a container, is then one
// evaluator: the mini suite's shipped anchors hold for its runs, and a
// campaign outlives a rebuilt worker or image. A build too old to answer
// is named by its digest.
func evaluatorName(ctx context.Context, s *workspace.Sandbox, spec runtime.TaskSpec, command []string) string {
	digest := s.Digest(ctx, spec.Image)
	if len(command) < 2 || command[0] != "{self}" || command[1] != reference.EvalCommand || len(spec.Command) == 0 {
		return digest
	}
	if n, ok := evaluatorNames.Load(digest); ok {
		return n.(string)
	}
	name, err := askName(ctx, s, spec)
	var old *notAName
	switch {
	case errors.As(err, &old):
		s.Logger.Info("the reference evaluator does not name its scoring code: named by its build", zap.String("build", digest), zap.Error(err))
		name = digest
	case err != nil:
		// Not kept: the next evaluation asks again.
		s.Logger.Warn("ask the reference evaluator its name", zap.String("build", digest), zap.Error(err))
		return digest
	}
	evaluatorNames.Store(digest, name)
	return name
}

// evaluatorNames are the names the reference evaluators of the images or
// binaries (by digest) this worker ran gave themselves.
var evaluatorNames sync.Map

// notAName: the evaluator ran and gave no name (a build from before
// names), as against failing to run.
type notAName struct{ why string }

func (e *notAName) Error() string { return e.why }

// askName runs spec's binary, in spec's image when it has one, as
// `reference-eval --name`, with no network, no mounts and no environment
// of the run's, and reads the name it prints.
func askName(ctx context.Context, s *workspace.Sandbox, spec runtime.TaskSpec) (string, error) {
	ask := runtime.TaskSpec{Name: spec.Name + "-name", Image: spec.Image, User: spec.User, Dir: spec.Dir, Labels: spec.Labels,
		Network: runtime.NetworkNone, MemoryBytes: spec.MemoryBytes, CPUs: spec.CPUs, PidsLimit: spec.PidsLimit,
		LogPath: spec.LogPath + ".name", LogLimit: 4 << 10, Command: []string{spec.Command[0], reference.EvalCommand, "--name"}}
	defer func() { _ = os.Remove(ask.LogPath) }()
	res, timedOut, err := s.RunToEnd(ctx, ask, "", 30*time.Second, s.Logger)
	switch {
	case err != nil:
		return "", err
	case timedOut:
		return "", errors.New("no answer within 30 s")
	}
	out, err := os.ReadFile(ask.LogPath)
	if err != nil {
		return "", fmt.Errorf("its answer: %w", err)
	}
	name := strings.TrimSpace(string(out))
	if !res.Successful() || !reference.IsEvaluatorName(name) {
		return "", &notAName{why: fmt.Sprintf("%s, answered %.80q", res, name)}
	}
	return name, nil
}
