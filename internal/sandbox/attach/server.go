// The worker's attach server: hellos, credentials, sessions.

package attach

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/netutil"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
)

// Runs is what the attach server asks of the runs, through Temporal: a
// run's invitations, where it is, and to resume a run its person left.
type Runs interface {
	Invites(ctx context.Context, run string) ([]Invite, error)
	Where(ctx context.Context, run string) (Whereabouts, error)
	Resume(ctx context.Context, run string) error
}

// Whereabouts is where a run is: its phase, whether it ended, the host of
// its running attempt ("": none) and the person's time so far.
type Whereabouts struct {
	Phase   string
	Ended   bool
	Host    string
	AgentS  float64
	LeftS   float64
	Waiting bool // it waits for its person (no lease held)
}

// Server lets people into their runs: a credential's token must be one of
// the run's invitations, and then only that run's container is reachable,
// as a shell on a pseudo-terminal. Each session is recorded (Keep).
type Server struct {
	HostID string
	Rooms  *Rooms
	Runs   Runs
	// Peers is another host's attach endpoint, where a run goes on there.
	Peers func(ctx context.Context, hostID string) (Endpoint, bool)
	// Keep stores a session's recording under the run, by name.
	Keep func(ctx context.Context, run, name string, cast io.Reader) error
	// SpoolDir is where recordings are spooled as they are made ("":
	// the system's temporary directory).
	SpoolDir string
	TLS      *tls.Config
	Log      *zap.Logger
	// Poll paces the wait for a run to move (a lease, another host).
	Poll time.Duration

	mu     sync.Mutex
	l      net.Listener
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
	gate   gate
}

// MaxSessions bounds the connections a worker's attach server holds; the
// rest wait in the kernel's backlog.
const MaxSessions = 256

// Serve accepts sessions on l until Close.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	s.l, s.conns = tls.NewListener(netutil.LimitListener(l, MaxSessions), s.TLS), map[net.Conn]bool{}
	tl := s.l
	s.mu.Unlock()
	for {
		c, err := tl.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			return fmt.Errorf("attach: %w", err)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			return nil
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serve(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Close ends every session (their recordings kept) and stops accepting.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	var err error
	if s.l != nil {
		err = s.l.Close()
	}
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Server) poll() time.Duration {
	if s.Poll > 0 {
		return s.Poll
	}
	return time.Second
}

// serve is one session: a hello, the credential checked, then the run.
func (s *Server) serve(c net.Conn) {
	defer func() { _ = c.Close() }()
	// Before the handshake, nothing asked of Temporal: a source that
	// knocks faster than people do is turned away.
	if !s.gate.knock(c.RemoteAddr()) {
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(helloTimeout))
	// The reader that took the hello reads the frames after it: they may
	// have come in the same segment.
	br := bufio.NewReaderSize(c, 4096)
	line, err := br.ReadSlice('\n')
	var h Hello
	if err == nil {
		err = json.Unmarshal(line, &h)
	}
	if err != nil || !h.Size.ok() {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := s.Log.With(zap.String("run", h.Run))
	var invites []Invite
	if err = runIDShape(h.Run); err == nil {
		invites, err = s.Runs.Invites(ctx, h.Run)
	}
	inv := Match(invites, h.Token)
	if err != nil || inv == nil {
		// One answer for every refusal: a wrong token, another run's, a
		// run that ended or never was.
		log.Info("attach refused", zap.String("from", c.RemoteAddr().String()))
		_ = writeFrame(c, frameEnd, []byte("refused: this credential does not open this run (or the run has ended)"))
		return
	}
	leave, ok := s.gate.enter(h.Run)
	if !ok {
		_ = writeFrame(c, frameEnd, []byte(fmt.Sprintf("refused: this run has %d sessions open already; close one first", MaxSessionsPerRun)))
		return
	}
	defer leave()
	ss := &session{s: s, conn: c, in0: br, hello: h, label: inv.Label, log: log.With(zap.String("person", inv.Label)),
		in: make(chan []byte, inputQueue), gone: make(chan struct{}), size: h.Size, started: time.Now()}
	ss.cast = NewCast(h.Size, h.Run+" ("+inv.Label+")", h.Term, ss.started, s.SpoolDir)
	defer ss.cast.Close()
	go ss.readClient()
	ss.log.Info("attached")
	why := ss.run(ctx)
	_ = writeFrame(c, frameEnd, []byte(why))
	ss.log.Info("detached", zap.String("why", why))
	if s.Keep != nil {
		name := fmt.Sprintf("%s-%s.cast", ss.started.UTC().Format("20060102T150405.000Z"), safeLabel(inv.Label))
		kctx, kcancel := context.WithTimeout(context.Background(), time.Minute)
		defer kcancel()
		r, err := ss.cast.Reader()
		if err == nil {
			err = s.Keep(kctx, h.Run, name, r)
		}
		if err != nil {
			ss.log.Warn("session recording not kept", zap.Error(err))
		}
	}
}

// session is one person's attachment.
type session struct {
	s       *Server
	conn    net.Conn
	in0     io.Reader // the client's frames
	hello   Hello
	label   string
	log     *zap.Logger
	cast    *Cast
	started time.Time

	in   chan []byte   // keystrokes
	gone chan struct{} // the client went
	wmu  sync.Mutex
	smu  sync.Mutex
	size Size
	// resizeDue: size changed and is not applied yet; resizedAt when the
	// last was (resize).
	resizeDue bool
	resizedAt time.Time
	sh        runtime.Shell // the shell open in room shRoom
	shRoom    *Room
	// shEnd yields once when sh's output ends (nil: it exited).
	shEnd chan error
}

// readClient turns the client's frames into keystrokes and resizes.
func (ss *session) readClient() {
	defer close(ss.gone)
	for {
		kind, p, err := readFrame(ss.in0)
		if err != nil {
			return
		}
		switch kind {
		case frameData:
			ss.cast.Input(p, time.Now())
			if !ss.queue(p) {
				return // nobody reads: the session is stuck
			}
			ss.resize(nil)
		case frameResize:
			var sz Size
			if json.Unmarshal(p, &sz) == nil && sz.ok() {
				ss.resize(&sz)
			}
		}
	}
}

// say shows text on the person's terminal, recorded.
func (ss *session) say(text string) error {
	p := []byte(strings.ReplaceAll(text, "\n", "\r\n"))
	ss.cast.Output(p, time.Now())
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	return writeFrame(ss.conn, frameData, p)
}

// run moves the person along with their run until the session ends; it
// returns why.
func (ss *session) run(ctx context.Context) string {
	for {
		select {
		case <-ss.gone:
			return "the person's terminal went"
		default:
		}
		if room := ss.s.Rooms.Get(ss.hello.Run); room != nil {
			if why := ss.inRoom(ctx, room); why != "" {
				return why
			}
			continue
		}
		w, err := ss.s.Runs.Where(ctx, ss.hello.Run)
		switch {
		case err != nil:
			return "the run cannot be reached now: " + err.Error()
		case w.Ended:
			return "the run has ended"
		case w.Host != "" && w.Host != ss.s.HostID:
			return ss.redirect(ctx, w.Host)
		case w.Waiting:
			if why := ss.released(ctx, w); why != "" {
				return why
			}
		default:
			if why := ss.wait(ctx, "the run is "+w.Phase+"; waiting for its container"); why != "" {
				return why
			}
		}
	}
}

// inRoom is the person in their run's container: a shell while the clock
// runs, the clock's prompt while it is paused. "" means look again (the
// clock changed, the attempt ended).
func (ss *session) inRoom(ctx context.Context, room *Room) string {
	_, submitted, _ := room.Clock.State(time.Now())
	running := room.Clock.Started()
	switch {
	case submitted:
		return "submitted: the run is being checkpointed and evaluated"
	case running:
		return ss.shell(ctx, room)
	}
	ss.smu.Lock()
	fromShell := ss.sh != nil && ss.shRoom == room
	ss.smu.Unlock()
	if fromShell { // the shell's last words (task stop's answer) first
		time.Sleep(FreezeAfter + 200*time.Millisecond)
	}
	return ss.prompt(ctx, room.Clock.Changed(), room.Done(), func(verb, text string) (contract.Clock, error) {
		return room.Clock.Do(verb, text)
	}, room.Clock.Read(), room.Brief)
}

// shell carries the person's terminal to a shell in the container until
// the clock changes, the attempt ends, or the shell exits.
func (ss *session) shell(ctx context.Context, room *Room) string {
	changed := room.Clock.Changed()
	ss.smu.Lock()
	if ss.shRoom != room && ss.sh != nil { // the last attempt's, gone with it
		_ = ss.sh.Close()
		ss.sh = nil
	}
	sh, size, out := ss.sh, ss.size, ss.shEnd
	ss.smu.Unlock()
	if sh == nil {
		out = make(chan error, 1)
		spec := room.Shell
		spec.Cols, spec.Rows = size.Cols, size.Rows
		var err error
		if sh, err = room.Shells.Shell(ctx, spec); err != nil {
			return "no shell in the run's container: " + err.Error()
		}
		ss.smu.Lock()
		ss.sh, ss.shEnd, ss.shRoom = sh, out, room
		ss.smu.Unlock()
		go func() { out <- ss.pump(sh) }()
		go func() {
			<-room.Done()
			_ = sh.Close()
		}()
		_ = ss.say("\n[mlrb] your clock runs: `task stop` pauses it, `task submit` ends the run, `exit` detaches (the clock keeps running)\n")
	} else {
		_ = ss.say("\n[mlrb] the clock runs again\n")
		_, _ = sh.Write([]byte{12}) // Ctrl-L: the shell redraws its line
	}
	for {
		select {
		case p := <-ss.in:
			if _, err := sh.Write(p); err != nil {
				return "the shell went: " + err.Error()
			}
		case <-changed:
			return ""
		case <-room.Done():
			ss.dropShell()
			return ""
		case err := <-out:
			ss.dropShell()
			if err != nil {
				return "the shell went: " + err.Error()
			}
			return "detached (the shell exited); the run goes on: attach again with the same credential"
		case <-ss.gone:
			ss.dropShell()
			return "the person's terminal went"
		}
	}
}

func (ss *session) dropShell() {
	ss.smu.Lock()
	if ss.sh != nil {
		_ = ss.sh.Close()
	}
	ss.sh = nil
	ss.smu.Unlock()
}

// pump carries the shell's output to the person, recorded; nil when the
// shell ended.
func (ss *session) pump(sh runtime.Shell) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := sh.Read(buf)
		if n > 0 {
			ss.cast.Output(buf[:n], time.Now())
			ss.wmu.Lock()
			werr := writeFrame(ss.conn, frameData, buf[:n])
			ss.wmu.Unlock()
			if werr != nil {
				return werr
			}
		}
		if err != nil {
			return nil
		}
	}
}
