package local

import (
	"context"
	"path/filepath"
	"time"

	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers"
)

// Section is the local backend's configuration, providers.local.*.
type Section struct {
	Python    string        `mapstructure:"python" doc:"interpreter that runs python -m dask scheduler|worker"`
	Command   string        `mapstructure:"command" doc:"Dask command replacing '<python> -m dask', e.g. /opt/conda/bin/dask"`
	Host      string        `mapstructure:"host" doc:"address local schedulers and workers bind to"`
	Nanny     bool          `mapstructure:"nanny" doc:"run each worker under a Dask nanny (needed for client.restart)"`
	StopGrace time.Duration `mapstructure:"stop_grace" doc:"time a process gets after SIGTERM before SIGKILL"`
	// SchedulerMemory bounds a scheduler process as worker_memory bounds a
	// worker's.
	SchedulerMemory float64 `mapstructure:"scheduler_memory" doc:"memory each scheduler process may use, in GiB (its RLIMIT_DATA, plus 0.5 GiB for what Python maps and does not use); 0: unbounded"`
	// TrustUsers acknowledges that local clusters run as the gateway's own
	// Unix user and can read its data directory.
	TrustUsers bool `mapstructure:"trust_users" doc:"acknowledge that local clusters run users' code as the gateway's Unix user (required outside dev)"`
}

// Registration is the local backend for the gateway's list of backends.
func Registration() providers.Registration {
	return providers.Register(providers.Backend[Section]{
		Name: Name,
		Defaults: func() *Section {
			return &Section{Python: "/usr/bin/python3", Host: "127.0.0.1", StopGrace: 10 * time.Second, SchedulerMemory: 2}
		},
		Problems: func(s *Section, dev bool) []string {
			problems := providers.SchedulerMemoryProblems(Name, s.SchedulerMemory)
			if dev || s.TrustUsers {
				return problems
			}
			return append(problems, "the local provider runs every user's Dask code as the gateway's own Unix user, able to read the gateway's data (keys, database): "+
				"set providers.local.trust_users: true only if every user may act as the gateway (a single-user or fully trusted team); otherwise use an isolating provider")
		},
		New: func(_ context.Context, s *Section, d providers.Deps) (providers.Provider, error) {
			return providers.Made(New(Config{
				Dir: filepath.Join(d.DataDir, "clusters"), Python: s.Python, Command: s.Command,
				Host: s.Host, Nanny: s.Nanny, GatewayID: d.GatewayID, StopGrace: s.StopGrace, Logger: d.Logger,
				SchedulerMemory: providers.GiBBytes(s.SchedulerMemory),
			}))
		},
		// Its errors say which key to set (providers.local.python).
		NamesKeys:    true,
		StartTimeout: time.Minute,
		TypicalStart: 20 * time.Second,
		CrashPoints: []crashpoint.Name{
			pointSchedulerSpawned, pointWorkerSpawned, pointMemberRecorded, pointMemberSignalled,
			pointWorkerStopped, pointClusterWorkersStopped, pointClusterStopped,
		},
	})
}
