// `starter invite` and `starter attach`: a person let into their run.

package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sort"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	workflowpb "go.temporal.io/api/workflow/v1"
	"golang.org/x/term"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/fleet/hosts"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/attach"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/workflows"
)

// inviteCmd lets a person into their run: an invitation the run keeps as
// a hash, and a credential printed once for the operator to hand over.
func inviteCmd() *cobra.Command {
	var label, via, bench string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "invite RUN_ID | --benchmark ID  --label NAME",
		Short: "let a person into their run (a human agent's), or into the next uninvited one of a benchmark: prints the credential they attach with, once",
		Args:  cobra.MaximumNArgs(1),
		PreRunE: func(_ *cobra.Command, args []string) error {
			if (len(args) == 1) == (bench != "") {
				return cli.Usagef("give a RUN_ID, or --benchmark ID (its next person's run nobody is invited to)")
			}
			return nil
		},
		RunE: run(func(g *globals, args []string) error {
			runID, err := nextUninvited(g, args, bench)
			if err != nil {
				return err
			}
			cred, n, err := invite(g, runID, label, via)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(g.out, map[string]any{"run_id": runID, "label": label, "credential": cred.String(), "via": cred.Via})
			}
			fmt.Fprintf(g.out, "invited %s to run %s (invitation %d); the credential is shown this once, give it to them:\n\n  starter attach %s\n\n", label, runID, n, cred)
			fmt.Fprintf(g.out, "It opens a shell in the run's container through %s until the run ends; the clock starts when they type `task start`.\n", cred.Via.Addr)
			return nil
		}),
	}
	cmd.Flags().StringVar(&label, "label", "", "the person's label, kept with the run and its recordings (no other personal data)")
	cmd.Flags().StringVar(&bench, "benchmark", "", "invite to the next run of this benchmark that waits for its person and has no invitation yet")
	cmd.Flags().StringVar(&via, "via", "", "host id of the worker to attach through (default: the run's, else the host seen last)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	_ = cmd.MarkFlagRequired("label")
	return cmd
}

func invite(g *globals, runID, label, via string) (attach.Credential, int, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return attach.Credential{}, 0, fmt.Errorf("token: %w", err)
	}
	cred := attach.Credential{Run: runID, Token: base64.RawURLEncoding.EncodeToString(b)}
	c, err := g.client()
	if err != nil {
		return cred, 0, err
	}
	st, err := queryStatus(g.ctx, c, runID)
	if err != nil {
		return cred, 0, err
	}
	store, err := g.store()
	if err != nil {
		return cred, 0, err
	}
	if cred.Via, err = attachVia(g, store, via, st.AttemptHost); err != nil {
		return cred, 0, err
	}
	if cred.Pins, err = attachPins(g, store); err != nil {
		return cred, 0, err
	}
	cfg, err := g.config()
	if err != nil {
		return cred, 0, err
	}
	cred.Provisioned = cfg.Provision.Kind != config.ProvisionStatic
	var n int
	if err := update(g.ctx, c, runID, workflows.UpdateInvite, workflows.Invite{Hash: attach.HashToken(cred.Token), Label: label}, &n); err != nil {
		return cred, 0, err
	}
	return cred, n, nil
}

// nextUninvited is the run named, else the benchmark's person's run that
// waits for its person with no invitation yet (the first by id).
func nextUninvited(g *globals, args []string, bench string) (string, error) {
	if len(args) == 1 {
		return args[0], nil
	}
	c, err := g.client()
	if err != nil {
		return "", err
	}
	q := fmt.Sprintf("MlrbBenchmark = '%s' AND MlrbPhase = '%s' AND ExecutionStatus = 'Running'", bench, runs.PhaseAwaitingPerson)
	var ids []string
	if err := listAll(g.ctx, c, q, 0, func(e *workflowpb.WorkflowExecutionInfo) { ids = append(ids, e.Execution.WorkflowId) }); err != nil {
		return "", fmt.Errorf("waiting runs of %s: %w", bench, err)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if st, err := queryStatus(g.ctx, c, id); err == nil && st.Invited == 0 {
			return id, nil
		}
	}
	return "", cli.Usagef("benchmark %s has no person's run waiting without an invitation (%d waiting)", bench, len(ids))
}

// attachVia is the attach server a credential names: the host asked for,
// else the run's current one, else a live host, a static one first: a
// provisioned host (a Slurm job, an instance) goes with its attempt, and
// the credential must outlive it (a static worker sends the person on to
// wherever the run goes next).
func attachVia(g *globals, store blob.Store, via, current string) (attach.Endpoint, error) {
	recs, err := hosts.List(g.ctx, store)
	if err != nil {
		return attach.Endpoint{}, err
	}
	sort.SliceStable(recs, func(i, j int) bool {
		if si, sj := recs[i].Source == "static", recs[j].Source == "static"; si != sj {
			return si
		}
		return recs[i].SeenAt.After(recs[j].SeenAt)
	})
	pick := func(id string) *hosts.Attach {
		for _, r := range recs {
			if r.Attach != nil && !r.Stopped && (id == "" || r.ID == id) {
				return r.Attach
			}
		}
		return nil
	}
	a := pick(via)
	if a == nil && via != "" {
		return attach.Endpoint{}, cli.Usagef("--via %s: no running worker of that host id takes attaches (human.listen; `starter hosts`)", via)
	}
	if c := pick(current); via == "" && current != "" && c != nil {
		a = c
	}
	if a == nil {
		return attach.Endpoint{}, cli.Usagef("no running worker takes attaches: start one with host.runtime docker and human.listen set (`starter hosts`)")
	}
	return attach.Endpoint{Addr: a.Addr, Pin: a.Pin}, nil
}

// attachPins are the pins of every running worker that takes attaches
// now: where the run may send its person on to.
func attachPins(g *globals, store blob.Store) ([]string, error) {
	recs, err := hosts.List(g.ctx, store)
	if err != nil {
		return nil, err
	}
	var pins []string
	for _, r := range recs {
		if r.Attach != nil && !r.Stopped && !slices.Contains(pins, r.Attach.Pin) {
			pins = append(pins, r.Attach.Pin)
		}
	}
	return pins, nil
}

// attachCmd is the person's side: their terminal on a shell in their
// run's container, through the worker the credential names.
func attachCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "attach CREDENTIAL",
		Short: "open your shell in your run's container with the credential `starter invite` printed (no other config needed)",
		Args:  cobra.ExactArgs(1),
		RunE: run(func(g *globals, args []string) error {
			cred, err := attach.ParseCredential(args[0])
			if err != nil {
				return cli.Usagef("%v", err)
			}
			return attachTerminal(g, cred)
		}),
	}
}

// attachTerminal carries this terminal (raw, resized as it changes) to
// the run until the session ends, then says why.
func attachTerminal(g *globals, cred attach.Credential) error {
	t := attach.Terminal{In: os.Stdin, Out: os.Stdout, Size: attach.Size{Cols: 80, Rows: 24}, Term: os.Getenv("TERM")}
	fd := int(os.Stdin.Fd())
	resize := make(chan attach.Size, 1)
	t.Resize = resize
	if term.IsTerminal(fd) {
		old, err := term.MakeRaw(fd)
		if err != nil {
			return fmt.Errorf("terminal: %w", err)
		}
		defer func() { _ = term.Restore(fd, old) }()
		if w, h, err := term.GetSize(fd); err == nil {
			t.Size = attach.Size{Cols: uint(w), Rows: uint(h)}
		}
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				if w, h, err := term.GetSize(fd); err == nil {
					select {
					case resize <- attach.Size{Cols: uint(w), Rows: uint(h)}:
					default:
					}
				}
			}
		}()
	}
	why, err := attach.Attach(g.ctx, cred, t)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "\r\n[mlrb] %s (%s)\r\n", why, time.Now().UTC().Format(time.TimeOnly))
	return nil
}
