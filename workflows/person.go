// A person's run (a human agent) waits for its person before each lease.

package workflows

import (
	"fmt"
	"regexp"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// A person's run (a human agent) waits for its person before each lease:
// at its start, and after a pause long enough to give its GPU back. The
// person asks for the lease by starting their clock (`task start`, at the
// attach server's prompt), which sends UpdateResume; the operator lets
// them in with UpdateInvite (starter invite).
const (
	// UpdateInvite adds an invitation (Invite) to a person's run.
	UpdateInvite = "invite"
	// UpdateResume asks a person's run waiting for them to lease again.
	UpdateResume = "resume"
	// QueryInvites answers a person's run's invitations, as hashes.
	QueryInvites = "invites"
	// maxInvites bounds a run's invitations (each in its history).
	maxInvites = 100
)

// Invite is an invitation as the run keeps it: the SHA-256 of its token
// (hex), never the token, and the person's label.
type Invite struct {
	Hash  string `json:"hash"`
	Label string `json:"label"`
}

var (
	hashPattern  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	labelPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)
)

// person is a person's run's part: its invitations, the wait for its
// person, and what their clock kept.
type person struct {
	c       *runCore
	gate    *gate
	invites []Invite
	// resumed: the person asked for the next lease (their clock runs
	// from the attempt's start).
	resumed bool
	notes   []contract.Note
}

// human tells a person's run.
func (p *person) human() bool { return p.c.in.AgentDef != nil && p.c.in.AgentDef.Human }

// setHandlers registers the invitation and resume updates and the
// invitations' query (from setup, with the other handlers).
func (p *person) setHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryInvites, func() ([]Invite, error) {
		if p.c.st.Phase == runs.PhaseDone {
			return nil, nil // credentials are useless once the run ended
		}
		return p.invites, nil
	}); err != nil {
		return fmt.Errorf("invites query: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateInvite, func(ctx workflow.Context, inv Invite) (int, error) {
		p.invites = append(p.invites, inv)
		p.c.st.Invited = len(p.invites)
		return len(p.invites), nil
	}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, inv Invite) error {
		switch {
		case !p.human():
			return fmt.Errorf("run %s is an agent's, not a person's: nobody attaches to it", p.c.st.RunID)
		case p.c.st.Phase == runs.PhaseDone:
			return fmt.Errorf("run %s has ended", p.c.st.RunID)
		case !hashPattern.MatchString(inv.Hash):
			return fmt.Errorf("invite: hash must be a token's SHA-256 in hex")
		case !labelPattern.MatchString(inv.Label):
			return fmt.Errorf("invite: label %q: letters, digits, '.', '_', '@', '-' (up to 64)", inv.Label)
		case len(p.invites) >= maxInvites:
			return fmt.Errorf("invite: run %s has %d invitations already", p.c.st.RunID, maxInvites)
		}
		return nil
	}}); err != nil {
		return fmt.Errorf("invite update: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateResume, func(ctx workflow.Context) (Status, error) {
		p.resumed = true
		return p.c.st, nil
	}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context) error {
		if p.c.st.Phase != runs.PhaseAwaitingPerson {
			return fmt.Errorf("run %s is %s, not waiting for its person", p.c.st.RunID, p.c.st.Phase)
		}
		return nil
	}}); err != nil {
		return fmt.Errorf("resume update: %w", err)
	}
	return nil
}

// await waits for the person to start their clock, up to the policy's
// wait limit; the wait is paused time. It tells whether they came. The
// run's benchmark is told, once, that it waits (as for an operator's
// retry): it holds no lease, so its benchmark slot goes to the next run,
// and a benchmark's people are all invited at once.
func (p *person) await(ctx workflow.Context) (bool, error) {
	p.c.setPhase(ctx, runs.PhaseAwaitingPerson)
	p.gate.park(ctx)
	since := workflow.Now(ctx)
	ok, err := workflow.AwaitWithTimeout(ctx, p.c.pol.PersonWaitLimit, func() bool { return p.resumed || p.c.st.CancelRequested })
	p.c.st.Budget.PausedS += workflow.Now(ctx).Sub(since).Seconds()
	return ok, err
}

// input gives a person's attempt their clock's terms: it runs from the
// start when they asked for the attempt.
func (p *person) input(in *activities.AgentInput) {
	if !p.human() {
		return
	}
	in.ReleaseAfter, in.ClockRunning = p.c.pol.ReleaseAfter, p.resumed
	p.resumed = false
}

// labels are the invited people's labels, each once.
func (p *person) labels() []string {
	var out []string
	for _, inv := range p.invites {
		if !slices.Contains(out, inv.Label) {
			out = append(out, inv.Label)
		}
	}
	return out
}

// took books what a person's attempt's clock kept: its paused time and
// their notes.
func (p *person) took(out *activities.AgentResult) {
	if out == nil || !p.human() {
		return
	}
	p.c.st.Budget.PausedS += out.PausedS
	p.notes = append(p.notes, out.Notes...)
}

// result: the people of a person's run and their notes.
func (p *person) result(res *runs.Result) { res.People, res.Notes = p.labels(), p.notes }
