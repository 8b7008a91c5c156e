// startAttach serves people's runs on this worker (human.listen).

package app

import (
	"context"
	"fmt"
	"io"
	"net"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/fleet/hosts"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/attach"
	"github.com/mlrb/mlrb/workflows"
)

// startAttach serves people's runs on this worker (human.listen): their
// shells open here, through a TLS server pinned by its certificate, and
// its endpoint is published in the host's record for `starter invite`.
// A worker without containers (host.runtime process) takes no people.
func (s *startup) startAttach() error {
	if s.cfg.Human.Listen == "" || s.docker == nil {
		return nil
	}
	tlsCfg, pin, err := attach.Identity(s.cfg.WorkDir(), s.cfg.Host.ID)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", s.cfg.Human.Listen)
	if err != nil {
		return fmt.Errorf("human.listen %s: %w", s.cfg.Human.Listen, err)
	}
	addr := s.cfg.Human.Advertise
	if addr == "" {
		addr = l.Addr().String()
	}
	s.rec.rec.Attach = &hosts.Attach{Addr: addr, Pin: pin}
	store := s.engine.Store
	srv := &attach.Server{HostID: s.cfg.Host.ID, Rooms: s.acts.Attempts.Rooms, Runs: temporalRuns{c: s.c}, TLS: tlsCfg, Log: s.log.Named("attach"),
		Peers: func(ctx context.Context, id string) (attach.Endpoint, bool) {
			r, ok, err := hosts.Get(ctx, store, id)
			if err != nil || !ok || r.Attach == nil {
				return attach.Endpoint{}, false
			}
			return attach.Endpoint{Addr: r.Attach.Addr, Pin: r.Attach.Pin}, true
		},
		Keep: func(ctx context.Context, run, name string, cast io.Reader) error {
			return store.Put(ctx, attach.SessionKey(run, name), cast)
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil {
			s.log.Error("attach server", zap.Error(err))
		}
	}()
	s.log.Info("people attach here", zap.String("addr", addr), zap.String("pin", pin))
	s.push(func() { _ = srv.Close(); <-done })
	return nil
}

// temporalRuns is the attach server's view of the runs, through Temporal.
type temporalRuns struct{ c client.Client }

func (t temporalRuns) Invites(ctx context.Context, run string) ([]attach.Invite, error) {
	v, err := t.c.QueryWorkflow(ctx, run, "", workflows.QueryInvites)
	if err != nil {
		return nil, err
	}
	var invites []workflows.Invite
	if err := v.Get(&invites); err != nil {
		return nil, err
	}
	out := make([]attach.Invite, len(invites))
	for i, inv := range invites {
		out[i] = attach.Invite{Hash: inv.Hash, Label: inv.Label}
	}
	return out, nil
}

func (t temporalRuns) Where(ctx context.Context, run string) (attach.Whereabouts, error) {
	v, err := t.c.QueryWorkflow(ctx, run, "", workflows.QueryStatus)
	if err != nil {
		return attach.Whereabouts{}, err
	}
	var st workflows.Status
	if err := v.Get(&st); err != nil {
		return attach.Whereabouts{}, err
	}
	return attach.Whereabouts{Phase: string(st.Phase), Ended: st.Phase == runs.PhaseDone, Host: st.AttemptHost,
		AgentS: st.Budget.UsedS, LeftS: st.Budget.Left(), Waiting: st.Phase == runs.PhaseAwaitingPerson}, nil
}

func (t temporalRuns) Resume(ctx context.Context, run string) error {
	h, err := t.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: run, UpdateName: workflows.UpdateResume, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		return fmt.Errorf("resume %s: %w", run, err)
	}
	return h.Get(ctx, nil)
}
