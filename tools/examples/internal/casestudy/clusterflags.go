package casestudy

import (
	"errors"
	"flag"
	"fmt"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/internal/cpuacct"
)

// ClusterConfig is what both case studies' clusters are built from: where
// each member runs, over which network, and the bi-channel's template.
// The commands embed it in their own cluster configurations.
type ClusterConfig struct {
	Places []Place
	// Transport is the network between the members: "tcp" (kernel TCP)
	// or one of the command's bi-channel modes.
	Transport string
	// Fast is the bi-channel's fast path; FastPath, if set, builds member
	// i's instead (tests: an in-process network).
	Fast     bichannel.FastMode
	FastPath func(member int) transport.Path
	Bi       bichannel.Config // template: the fields the cluster sets are ignored
}

// ClusterUsage is what a command says about its cluster in the help of
// ClusterFlags.
type ClusterUsage struct {
	Cmd    string // the command's name, which prefixes the errors of Places
	Member string // what a Place holds: "node", "host"
	// Transports is -transport's default; Allowed its words, described
	// by TransportUsage.
	Transports     string
	Allowed        []string
	TransportUsage string
}

// ClusterFlags are the flags that say where a case study's cluster runs
// and over what: -transport, -place, -testbed -fast and -procs. Register them on
// a flag set, and Check them after it has parsed.
type ClusterFlags struct {
	Transports []string          // -transport
	Place      cpuacct.Placement // -place
	Testbed    string            // -testbed: a testbed's prefix, "" for loopback
	Fast       string            // -fast: udp, vnic, auto or fabric
	Procs      string            // -procs: ProcsOne or ProcsPerHost

	transports, place string
	u                 ClusterUsage
}

// Register defines the flags on fs.
func (f *ClusterFlags) Register(fs *flag.FlagSet, u ClusterUsage) {
	f.u = u
	fs.StringVar(&f.transports, "transport", u.Transports, u.TransportUsage)
	fs.StringVar(&f.place, "place", "host=1,nic=0", "CPU placement: host=CPUS,nic=CPUS, or none (no pinning)")
	fs.StringVar(&f.Testbed, "testbed", "", "run "+u.Member+" i in namespace PREFIX-h<i> of vnicctl testbed up")
	fs.StringVar(&f.Fast, "fast", "udp", "bi-channel fast path: udp, vnic, auto or fabric")
	fs.StringVar(&f.Procs, "procs", ProcsOne, "processes: one (every "+u.Member+" here) or per-host (one each)")
}

// Check validates the parsed flags and fills Transports and Place.
func (f *ClusterFlags) Check() error {
	var err error
	if f.Transports, err = Choices("transport", f.transports, f.u.Allowed...); err != nil {
		return err
	}
	if f.Place, err = cpuacct.ParsePlacement(f.place); err != nil {
		return fmt.Errorf("-place: %w", err)
	}
	if f.Procs != ProcsOne && f.Procs != ProcsPerHost {
		return fmt.Errorf("-procs %q: give %s or %s", f.Procs, ProcsOne, ProcsPerHost)
	}
	if f.Fast == "fabric" && f.Testbed != "" {
		return errors.New("-fast fabric runs every " + f.u.Member + " on this machine's loopback: drop -testbed")
	}
	return nil
}

// HostCPUs is where transport t runs (nil: unpinned): on the host CPUs,
// or for tcp-both, kernel TCP's best case, on the host and NIC CPUs.
func (f *ClusterFlags) HostCPUs(t string) []int {
	if f.Place.Name == "none" {
		return nil
	}
	if t == "tcp-both" {
		return f.Place.Both()
	}
	return f.Place.Host
}

// Places is where n members run, their workers receiving from basePort,
// and the bi-channel's fast path there. With -fast fabric they are on
// loopback with no vnicd socket yet (each bi-channel round starts its
// own: WithFabric); else on loopback or -testbed (Places).
func (f *ClusterFlags) Places(n int, basePort uint16) (bichannel.FastMode, []Place, error) {
	if f.Fast == "fabric" {
		// The control paths stay on loopback.
		return bichannel.FastVNIC, FabricPlaces("", n, basePort), nil
	}
	fast, err := bichannel.ParseFastMode(f.Fast)
	if err != nil {
		return fast, nil, err
	}
	places, err := Places(f.Testbed, n, fast, basePort)
	if err != nil {
		return fast, nil, fmt.Errorf("%s: %w", f.u.Cmd, err)
	}
	return fast, places, nil
}
