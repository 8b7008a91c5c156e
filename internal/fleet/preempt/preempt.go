// Spot interruption and rebalance notices read from the EC2 metadata service.

// Package preempt watches for the notice that a host is about to be taken
// back, so that the worker can hand its attempts back first: the EC2
// instance metadata service (IMDSv2) posts a spot interruption notice two
// minutes ahead, and a rebalance recommendation earlier still. (Slurm
// sends the job's processes SIGTERM, which the worker already handles.)
//
// The hand-back path, end to end: WatchEC2's callback stops the worker as
// SIGTERM does (worker/main.go); the SDK then closes each running
// activity's worker-stop channel, on which the agent's supervisor stops
// and checkpoints it (activities/attempt/supervise.go, workerStop) and the
// activity returns the hand-back (activities/attempt/agent.go, conclude); the
// run books nothing as lost and leases again (workflows/attempts.go).
package preempt

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/kit/every"
)

// notices are the metadata paths that exist only once a notice is given.
var notices = []struct{ path, what string }{
	{"spot/instance-action", "spot interruption notice"},
	{"events/recommendations/rebalance", "rebalance recommendation"},
}

// WatchEC2 polls the instance metadata service (endpoint "": the
// instance's own) every period until a notice appears, then calls notice
// once with what it says; it returns when ctx ends. A metadata service
// that cannot be reached is no notice: the watch goes on.
func WatchEC2(ctx context.Context, endpoint string, period time.Duration, log *zap.Logger, notice func(what string)) {
	c := imds.New(imds.Options{Endpoint: endpoint, ClientEnableState: imds.ClientEnabled})
	every.Now(ctx, period, func() bool {
		for _, n := range notices {
			if body, ok := read(ctx, c, n.path); ok {
				log.Warn("preemption notice from the instance metadata service", zap.String("notice", n.what), zap.String("body", body))
				notice(n.what + ": " + body)
				return false
			}
		}
		return true
	})
}

func read(ctx context.Context, c *imds.Client, path string) (string, bool) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out, err := c.GetMetadata(rctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		return "", false // 404 (no notice), or no metadata service now
	}
	defer func() { _ = out.Content.Close() }()
	b, err := io.ReadAll(io.LimitReader(out.Content, 4096))
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}
