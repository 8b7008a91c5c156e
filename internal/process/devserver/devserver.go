// The embedded Temporal server and Web UI.

// Package devserver embeds a real Temporal server (SQLite in a file) and its
// Web UI in the current process, so the default needs nothing installed.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiopts "github.com/temporalio/ui-server/v2/server/server_options"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	tlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mlrb/mlrb/internal/kit/ports"
)

// Options configure the embedded server.
type Options struct {
	StateDir  string // the SQLite file lives here; it survives restarts
	IP        string
	Port      int // frontend gRPC port
	UIPort    int // 0 disables the Web UI
	Namespace string
	// SearchAttributes are mapped in a new database's namespace; a state
	// dir made by an older version gets the new ones from the caller
	// (app.StartDevServer), through the operator API.
	SearchAttributes map[string]enumspb.IndexedValueType
	// Retention is how long closed runs stay listed (0: Temporal's 24h).
	Retention time.Duration
	Logger    *zap.Logger
}

// Server is a running embedded Temporal server.
type Server struct {
	server temporal.Server
	ui     *uiserver.Server
	opts   Options
	// release gives back the internal ports once the server is down.
	release func()
}

const clusterName = "active"

// Start launches the server with the namespace and its search attributes.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.IP == "" {
		o.IP = "127.0.0.1"
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if err := os.MkdirAll(o.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("devserver: state dir: %w", err)
	}
	for name, port := range map[string]int{"temporal port": o.Port, "ui port": o.UIPort} {
		if port == 0 && name == "ui port" {
			continue
		}
		if err := checkFree(o.IP, port); err != nil {
			return nil, fmt.Errorf("devserver: %s %d is in use (pick another with a flag): %w", name, port, err)
		}
	}
	// The server's own ports (frontend HTTP, history, matching, worker)
	// are held for its whole life, so no client socket and no other mlrb
	// process can take one between the choice and the bind.
	held := make([]*ports.Port, 0, 4)
	release := func() {
		for _, p := range held {
			p.Release()
		}
	}
	for range 4 {
		p, err := ports.Reserve(o.IP)
		if err != nil {
			release()
			return nil, fmt.Errorf("devserver: %w", err)
		}
		held = append(held, p)
	}
	sqlConf, err := sqlConfig(o)
	if err != nil {
		release()
		return nil, err
	}
	conf := serverConfig(o, sqlConf, held)
	hosts := map[primitives.ServiceName]static.Hosts{}
	for svc, c := range conf.Services {
		hosts[primitives.ServiceName(svc)] = static.SingleLocalHost(net.JoinHostPort(o.IP, strconv.Itoa(c.RPC.GRPCPort)))
	}
	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		release()
		return nil, fmt.Errorf("devserver: authorizer: %w", err)
	}
	logger := tlog.NewZapLogger(o.Logger)
	claimMapper, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger)
	if err != nil {
		release()
		return nil, fmt.Errorf("devserver: claim mapper: %w", err)
	}
	dyn := dynamicconfig.StaticClient{
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 1000,
		dynamicconfig.FrontendMaxNamespaceRPSPerInstance.Key():           10000,
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                 8192,
		// Every activity and workflow task goes to matching through the
		// transfer queue, read at most this often: the default 20/s spaced
		// each dispatch of back-to-back runs ~45 ms apart. The visibility
		// queue likewise delays what list, status and metrics count.
		dynamicconfig.TransferProcessorMaxPollRPS.Key():   1000,
		dynamicconfig.VisibilityProcessorMaxPollRPS.Key(): 1000,
		// The history service may drop a close notification to a waiting
		// client (a one-slot channel, sent without blocking) when events
		// come close together; the client then learns of the close only
		// when its long poll expires. A short poll bounds that wait.
		dynamicconfig.HistoryLongPollExpirationInterval.Key(): 2 * time.Second,
		// Tasks go to one partition of each queue, where the one worker's
		// polls wait: spread over Temporal's default 4, a task landing on
		// a partition without a poll waited to be forwarded to one that
		// had it (one at a time, 150 runs' p99 went from 101-165 ms to
		// 54-66 ms). Polls still read all 4, so that what a state dir made
		// before holds on the others is served.
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
	}
	srv, err := temporal.NewServer(
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dyn),
	)
	if err != nil {
		release()
		return nil, fmt.Errorf("devserver: new server: %w", err)
	}
	if err := srv.Start(); err != nil {
		release()
		return nil, fmt.Errorf("devserver: start: %w", err)
	}
	s := &Server{server: srv, opts: o, release: release}
	if o.UIPort != 0 {
		s.ui = uiserver.NewServer(uiopts.WithConfigProvider(&uiconfig.Config{
			Host:                o.IP,
			Port:                o.UIPort,
			TemporalGRPCAddress: s.Address(),
			EnableUI:            true,
			CORS:                uiconfig.CORS{CookieInsecure: true},
			HideLogs:            true,
			DisableNewsFetch:    true,
		}))
		go func() {
			if err := s.ui.Start(); err != nil && !errors.Is(err, context.Canceled) {
				o.Logger.Error("web ui stopped", zap.Error(err))
			}
		}()
	}
	return s, nil
}

// Address is the frontend's host:port.
func (s *Server) Address() string {
	return net.JoinHostPort(s.opts.IP, strconv.Itoa(s.opts.Port))
}

// UIAddress is the Web UI's URL, or "" when the UI is off.
func (s *Server) UIAddress() string {
	if s.ui == nil {
		return ""
	}
	return "http://" + net.JoinHostPort(s.opts.IP, strconv.Itoa(s.opts.UIPort))
}

// Stop stops the UI and the server.
func (s *Server) Stop() {
	if s.ui != nil {
		s.ui.Stop()
	}
	if err := s.server.Stop(); err != nil {
		s.opts.Logger.Warn("stopping temporal server", zap.Error(err))
	}
	s.release()
}

func sqlConfig(o Options) (*config.SQL, error) {
	file := filepath.Join(o.StateDir, "temporal.db")
	conf := &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: file,
		ConnectAttributes: map[string]string{
			"mode": "rwc",
			// WAL keeps readers off the writer's back and survives a SIGKILL.
			"journal_mode": "wal",
			"synchronous":  "normal",
			"busy_timeout": "10000",
		},
	}
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		if err := sqliteschema.SetupSchema(conf); err != nil {
			return nil, fmt.Errorf("devserver: create schema in %s: %w", file, err)
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, o.Namespace, false, o.SearchAttributes)
	if err != nil {
		return nil, fmt.Errorf("devserver: namespace config: %w", err)
	}
	if o.Retention > 0 {
		ns.Detail.Config.Retention = durationpb.New(o.Retention)
	}
	if err := sqliteschema.CreateNamespaces(conf, ns); err != nil {
		return nil, fmt.Errorf("devserver: create namespace %q: %w", o.Namespace, err)
	}
	if err := trimVisibility(file); err != nil {
		return nil, err
	}
	return conf, nil
}

// serverConfig lays the server out on the frontend port the user chose and
// the held ports: the first is the frontend's HTTP API, the next three the
// other services'.
func serverConfig(o Options, sqlConf *config.SQL, held []*ports.Port) *config.Config {
	httpPort := held[0].Number
	var conf config.Config
	addr := net.JoinHostPort(o.IP, strconv.Itoa(o.Port))
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = o.IP
	conf.Persistence.DefaultStore = "sqlite"
	conf.Persistence.VisibilityStore = "sqlite"
	conf.Persistence.NumHistoryShards = 1
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite": {SQL: sqlConf}}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             addr,
				HTTPAddress:            net.JoinHostPort(o.IP, strconv.Itoa(httpPort)),
				ClusterID:              "mlrb-dev",
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{}
	for i, svc := range []string{"frontend", "history", "matching", "worker"} {
		var sc config.Service
		sc.RPC.BindOnIP = o.IP
		if svc == "frontend" {
			sc.RPC.GRPCPort = o.Port
			sc.RPC.HTTPPort = httpPort
		} else {
			sc.RPC.GRPCPort = held[i].Number
		}
		conf.Services[svc] = sc
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = addr
	return &conf
}

func checkFree(ip string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}
