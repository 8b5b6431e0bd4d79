package transport

import (
	"context"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/rss"
)

// VNICQueue is what VNIC uses of a *client.Queue (see NewVNICOn).
type VNICQueue interface {
	Recv(dst []client.Packet) []client.Packet
	Release(pkts []client.Packet)
	Send(frames [][]byte) (int, error)
	SendGather(frames []client.Gather) (int, error)
	Wait(ctx context.Context) error
	Waker() *client.Waker // ends Wait without a context (client.Waker)
	TxPending() int       // frames posted on the TX ring that vnicd has not completed
}

// VNICTenant is what VNIC uses of a *client.Tenant.
type VNICTenant interface {
	Queues() int
	Queue(i int) VNICQueue
	RSSInfo() client.RSSInfo
	Err() error // client.ErrDaemonGone once vnicd is gone
	Close() error
}

// tenantAdapter is a *client.Tenant as a VNICTenant.
type tenantAdapter struct{ t *client.Tenant }

func (a tenantAdapter) Queues() int               { return a.t.Queues() }
func (a tenantAdapter) Queue(i int) VNICQueue     { return queueAdapter{a.t.Queue(i)} }
func (a tenantAdapter) RSSInfo() client.RSSInfo   { return a.t.RSS }
func (a tenantAdapter) Err() error                { return a.t.Err() }
func (a tenantAdapter) Close() error              { return a.t.Close() }
func (a tenantAdapter) Offloads() client.Offloads { return a.t.Offloads }

// queueAdapter drops the allocator errors of Recv and Release: a free
// that meets a busy pool lock loses no buffer (the queue keeps it and frees
// it at its next call), and Wait and Send report a corrupt allocator.
type queueAdapter struct{ *client.Queue }

func (q queueAdapter) Recv(dst []client.Packet) []client.Packet {
	dst, _ = q.Queue.Recv(dst)
	return dst
}

func (q queueAdapter) Release(pkts []client.Packet) { _ = q.Queue.Release(pkts) }

// rssFromTenant turns the RSS configuration vnicd reported into an
// rss.Config.
func rssFromTenant(info client.RSSInfo, queues int) (rss.Config, error) {
	name := info.Profile
	if name == "" {
		name = rss.ProfileToeplitz
	}
	var key rss.Key
	if len(info.Key) > 0 {
		key = rss.Key(info.Key)
	}
	p, err := rss.ParseProfile(name, key)
	if err != nil {
		return rss.Config{}, err
	}
	if len(info.RETA) == 0 {
		reta, err := rss.NewRETA(rss.DefaultRETASize, queues)
		return rss.Config{Profile: p, RETA: reta}, err
	}
	nq := queues
	for _, q := range info.RETA {
		nq = max(nq, int(q)+1)
	}
	reta, err := rss.NewRETA(len(info.RETA), nq)
	if err != nil {
		return rss.Config{}, err
	}
	for i, q := range info.RETA {
		if err := reta.Set(i, int(q)); err != nil {
			return rss.Config{}, err
		}
	}
	return rss.Config{Profile: p, RETA: reta}, nil
}
