// replayUpstream points an attempt's gateway at a finished run's transcript in place of the providers.

package attempt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/sandbox/gateway"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
)

// replayUpstream points an attempt's gateway at a finished run's
// transcript in place of the providers: a loopback server, for the
// attempt's life, answering each call with the recorded answer when the
// request is the recorded one (transcript.Replayer). The gateway meters
// and records the calls as ever; no provider is reached.
// It returns what stops the server: once, with the attempt's door, or
// when ctx ends, whichever comes first.
func (a *Attempts) replayUpstream(ctx context.Context, source string, oa, an *gateway.Upstream, log *zap.Logger) (func(), error) {
	r, err := transcript.LoadReplay(ctx, a.Runs.Engine.Store, source)
	if err != nil {
		return nil, fmt.Errorf("replay of %s: %w", source, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("replay of %s: %w", source, err)
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	stop := sync.OnceFunc(func() {
		_ = srv.Close()
		log.Info("replay ended", zap.String("source", source), zap.Int("served", r.Served()), zap.Int("calls", r.Calls()), zap.Error(r.Err()))
	})
	context.AfterFunc(ctx, stop)
	// A key of its own: the recorder masks keys wherever they appear,
	// and a word would be masked in the replay's own messages.
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		stop()
		return nil, fmt.Errorf("replay key: %w", err)
	}
	key := "mlrb-replay-" + hex.EncodeToString(b)
	base := "http://" + l.Addr().String()
	oa.URL, oa.Key, oa.KeyName = base+"/v1", key, "the replay of "+source
	an.URL, an.Key, an.KeyName = base, key, "the replay of "+source
	log.Info("LLM calls answered from a transcript", zap.String("source", source), zap.Int("calls", r.Calls()))
	return stop, nil
}
