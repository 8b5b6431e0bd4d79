//go:build linux

package tests

// The three baseline receivers of BenchmarkReceivers (a raw AF_XDP loop, an
// AF_PACKET TPACKET_V3 ring and a recvmmsg UDP socket) and the accounting
// helpers they share: thread and process CPU time, /proc counters.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/bpf"
	"github.com/vnic/vnic/internal/affinity"
	"github.com/vnic/vnic/internal/testbed"
	"github.com/vnic/vnic/xsk"
)

// rbCounter is one named counter of a run's ledger.
type rbCounter struct {
	Name  string
	Value uint64
}

// rbSession is a receiver opened in the DUT namespace. loop runs on a
// pinned thread, adds every frame it hands to the application that is a UDP
// datagram to port rbPort to got, and returns once stop is set or the
// deadline passes; every blocking call in it waits at most 10 ms. drops may
// be called from another goroutine while loop runs: it returns the counters
// that explain frames sent but not received (they add up), and info returns
// counters shown for context only.
type rbSession interface {
	loop(got *atomic.Uint64, stop *atomic.Bool, deadline time.Time) error
	drops() []rbCounter
	info() []rbCounter
	close() error
}

// isUDP4To reports whether frame is an Ethernet/IPv4/UDP frame to port.
func isUDP4To(frame []byte, port uint16) bool {
	if len(frame) < 14+20+8 || frame[12] != 0x08 || frame[13] != 0x00 || frame[14+9] != unix.IPPROTO_UDP {
		return false
	}
	ihl := int(frame[14]&0x0f) * 4
	if ihl < 20 || len(frame) < 14+ihl+8 {
		return false
	}
	return binary.BigEndian.Uint16(frame[14+ihl+2:]) == port
}

// startPinned runs fn on a new OS thread pinned to cpu and returns a
// function that waits for fn and returns the CPU time (user + system,
// getrusage RUSAGE_THREAD) the thread spent in it. The thread's mask is
// restored before it unlocks (internal/affinity).
func startPinned(cpu int, fn func() error) (wait func() (time.Duration, error)) {
	type result struct {
		cpu time.Duration
		err error
	}
	ch := make(chan result, 1)
	go func() {
		unpin, err := affinity.Pin(cpu)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer unpin()
		t0 := threadCPU()
		err = fn()
		ch <- result{threadCPU() - t0, err}
	}()
	var once sync.Once
	var r result
	return func() (time.Duration, error) {
		once.Do(func() { r = <-ch })
		return r.cpu, r.err
	}
}

// threadCPU is the calling thread's user + system time.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rbPinProcess pins every thread of process pid to cpu.
func rbPinProcess(pid, cpu int) error {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	var set unix.CPUSet
	set.Set(cpu)
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("pin thread %d of process %d to CPU %d: %w", tid, pid, cpu, err)
		}
	}
	return nil
}

// userHZ is the unit of /proc's tick counters (USER_HZ, 100 on Linux).
const userHZ = 100

// procCPU is the CPU time of process pid, all its threads. It sums the
// threads' /proc/<pid>/task/<tid>/schedstat run times (nanoseconds, the
// scheduler's own clock) where the kernel has them (CONFIG_SCHED_INFO):
// /proc/<pid>/stat's utime + stime are in 10 ms ticks, too coarse for a
// process that runs 100 ms in a 3 s run. A thread that has exited is in
// stat but no longer in task/, so when stat is ahead by more than its
// resolution, stat's figure is returned.
func procCPU(pid int) (time.Duration, error) {
	ticks, err := statCPU(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, c := range threadCPUs(pid) {
		sum += c
	}
	if ticks > sum+time.Second/userHZ {
		return ticks, nil
	}
	return sum, nil
}

// statCPU is utime + stime from a /proc stat file (10 ms resolution).
func statCPU(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("%s: no command field", path)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state); utime is 14, stime 15
	if len(f) < 13 {
		return 0, fmt.Errorf("%s: %d fields", path, len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * time.Second / userHZ, nil
}

// threadCPUs is the CPU time of each thread of process pid, by thread id:
// /proc/<pid>/task/<tid>/schedstat's run time (ns) where the kernel has
// it, else utime + stime from the thread's stat (10 ms resolution).
func threadCPUs(pid int) map[int]time.Duration {
	out := map[int]time.Duration{}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return out
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := fmt.Sprintf("/proc/%d/task/%d/", pid, tid)
		if b, err := os.ReadFile(dir + "schedstat"); err == nil {
			if f := strings.Fields(string(b)); len(f) == 3 {
				if ns, err := strconv.ParseUint(f[0], 10, 64); err == nil {
					out[tid] = time.Duration(ns)
					continue
				}
			}
		}
		if c, err := statCPU(dir + "stat"); err == nil {
			out[tid] = c
		}
	}
	return out
}

// softirqTime is the machine's softirq time (all CPUs) from /proc/stat.
// It counts every softirq on the machine, other users' too.
func softirqTime() time.Duration {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fs := strings.Fields(s.Text())
		if len(fs) > 7 && fs[0] == "cpu" {
			v, _ := strconv.ParseUint(fs[7], 10, 64)
			return time.Duration(v) * time.Second / userHZ
		}
	}
	return 0
}

// cpuBusy is each CPU's busy time from /proc/stat (user, nice, system,
// irq, softirq; idle, iowait and steal excluded), by CPU number.
func cpuBusy() map[int]time.Duration {
	out := map[int]time.Duration{}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(b), "\n") {
		fs := strings.Fields(l)
		if len(fs) < 8 || !strings.HasPrefix(fs[0], "cpu") || fs[0] == "cpu" {
			continue
		}
		cpu, err := strconv.Atoi(fs[0][3:])
		if err != nil {
			continue
		}
		var t uint64
		for _, i := range []int{1, 2, 3, 6, 7} {
			v, _ := strconv.ParseUint(fs[i], 10, 64)
			t += v
		}
		out[cpu] = time.Duration(t) * time.Second / userHZ
	}
	return out
}

// nsSNMP reads /proc/net/snmp as seen from the calling thread's network
// namespace (/proc/thread-self: /proc/self/net is the main thread's), as
// "Proto.Field" -> value.
func nsSNMP() (map[string]uint64, error) {
	b, err := os.ReadFile("/proc/thread-self/net/snmp")
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		k, v := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(k) != len(v) || len(k) == 0 {
			continue
		}
		proto := strings.TrimSuffix(k[0], ":")
		for j := 1; j < len(k); j++ {
			n, err := strconv.ParseInt(v[j], 10, 64)
			if err == nil && n >= 0 {
				out[proto+"."+k[j]] = uint64(n)
			}
		}
	}
	return out, nil
}

// --- afxdp-raw ------------------------------------------------------------

// rbXskRing is the AF_XDP RX and fill ring size of vnicd and afxdp-raw in
// the receivers benchmark: VNIC_BENCH_XSK_RING, a power of two from 64 to
// 65536, or xsk.DefaultRingSize.
func rbXskRing() int {
	if n := knobs.BenchXskRing; n != 0 {
		return n
	}
	return xsk.DefaultRingSize
}

// rbXDP is the floor for vnicd: vnic's own XDP program attached natively to
// the DUT's veth end, one AF_XDP socket per queue (package xsk, default
// RX-only configuration), and a loop that calls Recv and counts.
type rbXDP struct {
	objs  *bpf.Objects
	link  io.Closer
	src   *xsk.Source
	other atomic.Uint64
	// batches counts non-empty Recv calls, polls the sleeps in poll(2).
	batches, polls atomic.Uint64
}

func openXDP(dut testbed.Link, ns func(func() error) error, queues int) (*rbXDP, error) {
	r := &rbXDP{}
	err := ns(func() error {
		var err error
		if r.objs, err = bpf.Load(bpf.Options{Queues: queues, Config: bpf.Config{ClaimAll: true}}); err != nil {
			return err
		}
		var mode bpf.Mode
		if r.link, mode, err = r.objs.Attach(dut.DUTIndex, bpf.ModeNative); err != nil {
			return err
		}
		if mode != bpf.ModeNative {
			return fmt.Errorf("XDP attached in %v mode, want native", mode)
		}
		qs := make([]int, queues)
		for i := range qs {
			qs[i] = i
		}
		sc := xsk.DefaultConfig()
		sc.RxSize = rbXskRing()
		r.src, err = xsk.NewSource(xsk.SourceConfig{Ifindex: dut.DUTIndex, Queues: qs, Socket: sc, Map: r.objs})
		return err
	})
	if err != nil {
		return nil, errors.Join(err, r.close())
	}
	return r, nil
}

func (r *rbXDP) loop(got *atomic.Uint64, stop *atomic.Bool, deadline time.Time) error {
	dst := make([][]byte, 0, xsk.DefaultBatch)
	for i := 0; !stop.Load(); i++ {
		var err error
		if dst, err = r.src.Recv(dst[:0]); err != nil {
			return err
		}
		if len(dst) == 0 {
			if time.Now().After(deadline) {
				return errors.New("afxdp-raw: receive deadline passed")
			}
			r.polls.Add(1)
			if _, err := r.src.Poll(10 * time.Millisecond); err != nil {
				return err
			}
			continue
		}
		r.batches.Add(1)
		var k uint64
		for _, f := range dst {
			if isUDP4To(f, rbPort) {
				k++
			}
		}
		got.Add(k)
		r.other.Add(uint64(len(dst)) - k)
	}
	return nil
}

func (r *rbXDP) drops() []rbCounter {
	st, _ := r.src.Stats()
	c, _ := r.objs.Counters()
	return []rbCounter{
		{"xdp_passed_to_kernel", c.NoSocket + c.Unclaimed + c.Short},
		{"xsk_rx_dropped", st.RxDropped},
		{"xsk_rx_ring_full", st.RxRingFull},
	}
}

func (r *rbXDP) info() []rbCounter {
	st, _ := r.src.Stats()
	c, _ := r.objs.Counters()
	return []rbCounter{{"xdp_redirected", c.Redirected}, {"xsk_rx_frames", st.RxFrames}, {"xsk_fill_ring_empty", st.RxFillRingEmptyDescs},
		{"xdp_passed_arp", c.ARP}, {"other_frames_received", r.other.Load()}, {"recv_batches", r.batches.Load()}, {"polls", r.polls.Load()}}
}

func (r *rbXDP) close() error {
	var errs []error
	if r.src != nil {
		errs = append(errs, r.src.Close())
	}
	if r.link != nil {
		errs = append(errs, r.link.Close())
	}
	if r.objs != nil {
		errs = append(errs, r.objs.Close())
	}
	return errors.Join(errs...)
}

// --- afpacket-v3 ----------------------------------------------------------

// TPACKET_V3 ring geometry: 64 blocks of 128 KiB (8 MiB, about 85,000
// 60-byte frames); a block is handed over when full or after the latency
// budget (rbBudget, 10 ms by default: retire_blk_tov).
const (
	rbPktBlockSize = 128 << 10
	rbPktBlocks    = 64
)

// rbPacket is an AF_PACKET socket with a TPACKET_V3 RX ring bound to the
// DUT interface (IPv4 only, outgoing frames ignored).
type rbPacket struct {
	fd    int
	ring  []byte
	mu    sync.Mutex
	stats unix.TpacketStatsV3 // accumulated: reading PACKET_STATISTICS resets it
	// blocks counts blocks read, polls the sleeps in poll(2).
	blocks, polls atomic.Uint64
}

func openPacket(dut testbed.Link, ns func(func() error) error) (*rbPacket, error) {
	r := &rbPacket{fd: -1}
	err := ns(func() error {
		// Protocol 0: nothing is queued before the ring exists and bind
		// names the protocol.
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return os.NewSyscallError("socket(AF_PACKET)", err)
		}
		r.fd = fd
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
			return os.NewSyscallError("PACKET_VERSION", err)
		}
		req := unix.TpacketReq3{Block_size: rbPktBlockSize, Block_nr: rbPktBlocks, Frame_size: 2048,
			Frame_nr: rbPktBlockSize / 2048 * rbPktBlocks, Retire_blk_tov: uint32(rbBudget() / time.Millisecond)}
		if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
			return os.NewSyscallError("PACKET_RX_RING", err)
		}
		if r.ring, err = unix.Mmap(fd, 0, rbPktBlockSize*rbPktBlocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
			return os.NewSyscallError("mmap", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
			return os.NewSyscallError("PACKET_IGNORE_OUTGOING", err)
		}
		proto := uint16(unix.ETH_P_IP)
		proto = proto<<8 | proto>>8 // network order
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: dut.DUTIndex}); err != nil {
			return os.NewSyscallError("bind(AF_PACKET)", err)
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(err, r.close())
	}
	return r, nil
}

// Offsets in struct tpacket_block_desc (block_status, num_pkts,
// offset_to_first_pkt) and struct tpacket3_hdr (tp_next_offset,
// tp_snaplen, tp_mac).
const (
	rbBlkStatus = 8
	rbBlkNum    = 12
	rbBlkFirst  = 16
	rbPktNext   = 0
	rbPktSnap   = 12
	rbPktMac    = 24
)

func (r *rbPacket) loop(got *atomic.Uint64, stop *atomic.Bool, deadline time.Time) error {
	ne := binary.NativeEndian
	pfd := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN | unix.POLLERR}}
	for blk := 0; !stop.Load(); {
		base := blk * rbPktBlockSize
		status := (*uint32)(unsafe.Pointer(&r.ring[base+rbBlkStatus]))
		if atomic.LoadUint32(status)&unix.TP_STATUS_USER == 0 {
			if time.Now().After(deadline) {
				return errors.New("afpacket-v3: receive deadline passed")
			}
			r.polls.Add(1)
			if _, err := unix.Poll(pfd, 10); err != nil && !errors.Is(err, unix.EINTR) {
				return os.NewSyscallError("poll", err)
			}
			continue
		}
		n := int(ne.Uint32(r.ring[base+rbBlkNum:]))
		p := base + int(ne.Uint32(r.ring[base+rbBlkFirst:]))
		var k uint64
		for i := 0; i < n; i++ {
			mac, snap := p+int(ne.Uint16(r.ring[p+rbPktMac:])), int(ne.Uint32(r.ring[p+rbPktSnap:]))
			if end := base + rbPktBlockSize; mac+snap > end {
				return fmt.Errorf("afpacket-v3: frame at %d+%d runs past its block (ends at %d)", mac, snap, end)
			}
			if isUDP4To(r.ring[mac:mac+snap], rbPort) {
				k++
			}
			p += int(ne.Uint32(r.ring[p+rbPktNext:]))
		}
		got.Add(k)
		r.blocks.Add(1)
		atomic.StoreUint32(status, unix.TP_STATUS_KERNEL)
		blk = (blk + 1) % rbPktBlocks
	}
	return nil
}

func (r *rbPacket) readStats() unix.TpacketStatsV3 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, err := unix.GetsockoptTpacketStatsV3(r.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
		r.stats.Packets += st.Packets
		r.stats.Drops += st.Drops
		r.stats.Freeze_q_cnt += st.Freeze_q_cnt
	}
	return r.stats
}

func (r *rbPacket) drops() []rbCounter {
	return []rbCounter{{"tp_drops", uint64(r.readStats().Drops)}}
}

func (r *rbPacket) info() []rbCounter {
	st := r.readStats()
	return []rbCounter{{"tp_packets(incl. drops)", uint64(st.Packets)}, {"tp_freeze_q_cnt", uint64(st.Freeze_q_cnt)},
		{"blocks", r.blocks.Load()}, {"polls", r.polls.Load()}}
}

func (r *rbPacket) close() error {
	var errs []error
	if r.ring != nil {
		errs = append(errs, unix.Munmap(r.ring))
		r.ring = nil
	}
	if r.fd >= 0 {
		errs = append(errs, unix.Close(r.fd))
		r.fd = -1
	}
	return errors.Join(errs...)
}

// --- recvmmsg -------------------------------------------------------------

const (
	rbMmsgBatch = 64
	rbUDPRcvbuf = 4 << 20 // SO_RCVBUFFORCE; the kernel doubles it
	// skMeminfoDrops indexes SO_MEMINFO's array (SK_MEMINFO_DROPS).
	skMeminfoDrops = 8
)

// mmsghdr is struct mmsghdr.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

// rbUDP is a kernel UDP socket bound to the DUT address, port rbPort, read
// with recvmmsg in batches of rbMmsgBatch.
type rbUDP struct {
	fd int
	// calls counts recvmmsg calls that returned datagrams.
	calls atomic.Uint64
}

func openUDP(dut testbed.Link, ns func(func() error) error) (*rbUDP, error) {
	r := &rbUDP{fd: -1}
	err := ns(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return os.NewSyscallError("socket(AF_INET)", err)
		}
		r.fd = fd
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rbUDPRcvbuf); err != nil {
			return os.NewSyscallError("SO_RCVBUFFORCE", err)
		}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 10000}); err != nil {
			return os.NewSyscallError("SO_RCVTIMEO", err)
		}
		return os.NewSyscallError("bind(UDP)", unix.Bind(fd, &unix.SockaddrInet4{Port: rbPort, Addr: dut.DUTIP.As4()}))
	})
	if err != nil {
		return nil, errors.Join(err, r.close())
	}
	return r, nil
}

func (r *rbUDP) loop(got *atomic.Uint64, stop *atomic.Bool, deadline time.Time) error {
	const bufSize = 2048
	bufs := make([]byte, rbMmsgBatch*bufSize)
	iovs := make([]unix.Iovec, rbMmsgBatch)
	msgs := make([]mmsghdr, rbMmsgBatch)
	for i := range msgs {
		iovs[i].Base = &bufs[i*bufSize]
		iovs[i].SetLen(bufSize)
		msgs[i].hdr.Iov = &iovs[i]
		msgs[i].hdr.SetIovlen(1)
	}
	for !stop.Load() {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(r.fd), uintptr(unsafe.Pointer(&msgs[0])), rbMmsgBatch, unix.MSG_WAITFORONE, 0, 0)
		switch errno {
		case 0:
		case unix.EAGAIN, unix.EINTR:
			if time.Now().After(deadline) {
				return errors.New("recvmmsg: receive deadline passed")
			}
			continue
		default:
			return os.NewSyscallError("recvmmsg", errno)
		}
		got.Add(uint64(n))
		r.calls.Add(1)
	}
	runtime.KeepAlive(bufs)
	runtime.KeepAlive(iovs)
	return nil
}

// sockDrops is the socket's drop counter (SO_MEMINFO, SK_MEMINFO_DROPS):
// datagrams the socket could not queue (receive buffer full, bad checksum).
func (r *rbUDP) sockDrops() uint64 {
	var mi [9]uint32
	l := uint32(unsafe.Sizeof(mi))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(r.fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&mi[0])), uintptr(unsafe.Pointer(&l)), 0)
	if errno != 0 {
		return 0
	}
	return uint64(mi[skMeminfoDrops])
}

func (r *rbUDP) drops() []rbCounter { return []rbCounter{{"udp_socket_drops", r.sockDrops()}} }

func (r *rbUDP) info() []rbCounter {
	var rcvbuf int
	if v, err := unix.GetsockoptInt(r.fd, unix.SOL_SOCKET, unix.SO_RCVBUF); err == nil {
		rcvbuf = v
	}
	return []rbCounter{{"so_rcvbuf_bytes", uint64(rcvbuf)}, {"recvmmsg_calls", r.calls.Load()}}
}

func (r *rbUDP) close() error {
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}
