// `task`: a person's command inside their run's container (submit, note, pause, status).

package agentcmd

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlrb/mlrb/internal/run/contract"
)

// taskUsage is what `task` prints to a person.
const taskUsage = `usage: task start | stop | status | note TEXT | submit
  start    start (or go on with) the clock: your time counts only while it runs
  stop     pause the clock; a long pause gives the GPU back until you start again
  status   the time you have worked and the time left
  note     keep a note in the run's record (what you tried, what you saw)
  submit   end the run now: output/ is checkpointed and evaluated`

// Task is a person's `task` command: it asks the worker's clock, through
// the run's door, and prints its answer; it returns the exit code.
func Task(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || !slices.Contains(contract.ClockVerbs, args[0]) || (args[0] == contract.ClockNote) != (len(args) > 1) {
		fmt.Fprintln(stderr, taskUsage)
		return 2
	}
	base, token := os.Getenv(contract.EnvClockURL), os.Getenv(contract.EnvClockToken)
	if base == "" || token == "" {
		fmt.Fprintf(stderr, "task: %s and %s are not set: this shell is not in a person's run\n", contract.EnvClockURL, contract.EnvClockToken)
		return 2
	}
	req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(base, "/")+"/"+args[0], strings.NewReader(strings.Join(args[1:], " ")))
	if err != nil {
		fmt.Fprintln(stderr, "task:", err)
		return 1
	}
	req.Header.Set("Authorization", "Bearer "+token)
	// The door is the only way out, and the clock is the worker's own:
	// no proxy.
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}
	res, err := c.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "task: the worker's clock did not answer:", err)
		return 1
	}
	defer func() { _ = res.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
	if res.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "task %s: %s\n", args[0], strings.TrimSpace(string(body)))
		return 1
	}
	var clock contract.Clock
	if err := json.Unmarshal(body, &clock); err != nil {
		fmt.Fprintln(stderr, "task: the worker's answer:", err)
		return 1
	}
	fmt.Fprintln(stdout, clock)
	return 0
}

// holdCommand is a person's container's first process: it holds the
// container for the person's shells until SIGTERM (the deadline, a
// submit, a release), then ends as an agent that stopped on its own.
func holdCommand() *cobra.Command {
	return &cobra.Command{
		Use: "hold", Hidden: true, SilenceUsage: true,
		Short: "hold a person's container open until SIGTERM",
		RunE: func(*cobra.Command, []string) error {
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
			<-sig
			return nil
		},
	}
}
