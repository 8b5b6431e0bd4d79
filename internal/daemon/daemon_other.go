//go:build !linux

package daemon

import (
	"context"
	"errors"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/nic"
)

// ErrNotSupported: vnicd needs Linux (memfd, eventfd, SCM_RIGHTS, AF_XDP).
var ErrNotSupported = errors.New("daemon: vnicd runs on Linux only")

// Config is vnicd's configuration (see the Linux build).
type Config struct {
	Socket                          string
	SocketGroup                     int
	Engine                          nic.Config
	Source                          nic.Source
	SourceName, SourceMode          string
	Hooks                           Hooks
	Offloads                        proto.Offloads
	AxSize, BxSize, TxSize, BufSize int
	BuffersPerQueue                 int
	MaxQueues, MaxTenants           int
	HistorySize, RETASize           int
	NoHugePages                     bool
	Log                             zerolog.Logger
	Version, MetricsAddr            string
	Limits                          Limits
	AdminGroup                      *uint32
	OnTenants                       func(n int)
}

// Daemon is unavailable on this platform.
type Daemon struct{}

// New returns ErrNotSupported.
func New(Config) (*Daemon, error) { return nil, ErrNotSupported }

// Run returns ErrNotSupported.
func (*Daemon) Run(context.Context) error { return ErrNotSupported }

// Engine returns nil: there is no engine on this platform.
func (*Daemon) Engine() *nic.Engine { return nil }

// Stats returns empty statistics: there is no daemon on this platform.
func (*Daemon) Stats() proto.Stats { return proto.Stats{} }
