// capped passes the first limit bytes through, then a line saying the rest was dropped, then nothing.

package runtime

import (
	"fmt"
	"io"
	"sync"
)

// capped passes the first limit bytes through, then a line saying the
// rest was dropped, then nothing: a task's output is stored and shipped,
// and an agent printing without pause for 24 hours would fill disks and
// the store. It always reports the whole write as done, so that the task
// is never blocked on its output.
type capped struct {
	mu      sync.Mutex
	w       io.Writer
	left    int64
	limit   int64
	dropped bool
}

// Capped wraps w to hold at most limit bytes (0: no limit) and a marker.
func Capped(w io.Writer, limit int64) io.Writer {
	if limit <= 0 {
		return w
	}
	return &capped{w: w, left: limit, limit: limit}
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped {
		return len(p), nil
	}
	if int64(len(p)) <= c.left {
		c.left -= int64(len(p))
		_, err := c.w.Write(p)
		return len(p), err
	}
	_, err := c.w.Write(p[:c.left])
	c.left = 0
	c.dropped = true
	if err == nil {
		_, err = fmt.Fprintf(c.w, "\n[mlrb: output past %d bytes is dropped (agent.log_limit_mb)]\n", c.limit)
	}
	return len(p), err
}
