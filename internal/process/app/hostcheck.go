// Whether a host's worker is live: its pollers seen by the server.

package app

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/config"
)

// pollerFresh is how recently a poller must have polled to count as a
// live worker: a long poll lasts up to about a minute.
const pollerFresh = 90 * time.Second

// checkHostFree refuses a host.id that another worker polls: two machines
// on one host queue would run each other's attempts on the wrong GPUs.
func checkHostFree(ctx context.Context, c client.Client, cfg *config.Config, queue, identity string) error {
	resp, err := c.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_ACTIVITY)
	if err != nil {
		return fmt.Errorf("describe %s: %w", queue, err)
	}
	for _, p := range resp.GetPollers() {
		age := time.Since(p.GetLastAccessTime().AsTime())
		if p.GetIdentity() != identity && age < pollerFresh {
			return &config.Error{Msg: fmt.Sprintf("host.id: %q is already polled by another worker (%s, %s ago); give this worker its own host.id (MLRB_HOST_ID), or stop that one and wait %s",
				cfg.Host.ID, p.GetIdentity(), age.Round(time.Second), pollerFresh)}
		}
	}
	return nil
}
