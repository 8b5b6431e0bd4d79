package xsk

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Open creates an AF_XDP socket on queue of interface ifindex (resolved in
// the calling thread's network namespace), registers umem, maps its rings,
// gives every RX chunk to the fill ring and binds: zero-copy first with
// BindAuto, then copy mode (Mode reports which), retrying for up to
// cfg.BindTimeout while the queue's previous socket is still going away
// (EBUSY). The UMEM stays the caller's: close it after the socket.
func Open(ifindex, queue int, umem *UMEM, cfg Config) (*Socket, error) {
	return open(ifindex, queue, umem, false, cfg)
}

func open(ifindex, queue int, umem *UMEM, ownUMEM bool, cfg Config) (*Socket, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if ifindex < 1 || queue < 0 {
		return nil, fmt.Errorf("xsk: open: interface index %d, queue %d: use an index >= 1 and a queue >= 0", ifindex, queue)
	}
	if umem == nil || umem.closed {
		return nil, errors.New("xsk: open: no UMEM: create one with NewUMEM or NewUMEMFrom")
	}
	if !umem.inUse.CompareAndSwap(false, true) {
		return nil, errors.New("xsk: open: the UMEM is in use by another socket: give each socket its own UMEM")
	}
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		umem.inUse.Store(false)
		err = os.NewSyscallError("socket(AF_XDP)", err)
		switch {
		case errors.Is(err, unix.EAFNOSUPPORT):
			return nil, fmt.Errorf("xsk: open: %w: this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)", err)
		case errors.Is(err, os.ErrPermission):
			return nil, fmt.Errorf("xsk: open: %w: run as root or grant CAP_NET_RAW", err)
		}
		return nil, fmt.Errorf("xsk: open: %w", err)
	}
	s := &Socket{fd: fd, ifindex: ifindex, queue: queue, umem: umem, ownUMEM: ownUMEM, wakeup: !cfg.NoNeedWakeup}
	if err := s.setup(cfg); err != nil {
		s.release()
		return nil, err
	}
	return s, nil
}

func (s *Socket) setup(cfg Config) error {
	q := s.queue
	if err := registerUMEM(s.fd, s.umem); err != nil {
		if errors.Is(err, unix.ENOMEM) || errors.Is(err, os.ErrPermission) {
			return fmt.Errorf("xsk: queue %d: register %d-byte UMEM: %w: raise `ulimit -l` or grant CAP_IPC_LOCK", q, len(s.umem.mem), err)
		}
		return fmt.Errorf("xsk: queue %d: register %d-byte UMEM (%d-byte chunks): %w", q, len(s.umem.mem), s.umem.chunkSize, err)
	}
	for _, o := range []struct {
		opt  int
		name string
		n    int
	}{
		{unix.XDP_UMEM_FILL_RING, "fill", cfg.FillSize},
		{unix.XDP_UMEM_COMPLETION_RING, "completion", cfg.CompSize},
		{unix.XDP_RX_RING, "RX", cfg.RxSize},
		{unix.XDP_TX_RING, "TX", cfg.TxSize},
	} {
		if o.n == 0 {
			continue
		}
		if err := unix.SetsockoptInt(s.fd, unix.SOL_XDP, o.opt, o.n); err != nil {
			return fmt.Errorf("xsk: queue %d: size %s ring to %d: %w", q, o.name, o.n, os.NewSyscallError("setsockopt", err))
		}
	}
	off, err := mmapOffsets(s.fd)
	if err != nil {
		return fmt.Errorf("xsk: queue %d: ring offsets: %w", q, err)
	}
	if s.fill, err = s.mapRing(off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, cfg.FillSize, false, "fill"); err != nil {
		return err
	}
	if s.comp, err = s.mapRing(off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, cfg.CompSize, false, "completion"); err != nil {
		return err
	}
	s.fill.initProducer()
	s.comp.initConsumer()
	if cfg.RxSize > 0 {
		if s.rx, err = s.mapRing(off.Rx, unix.XDP_PGOFF_RX_RING, cfg.RxSize, true, "RX"); err != nil {
			return err
		}
		s.rx.initConsumer()
	}
	if cfg.TxSize > 0 {
		if s.tx, err = s.mapRing(off.Tx, unix.XDP_PGOFF_TX_RING, cfg.TxSize, true, "TX"); err != nil {
			return err
		}
		s.tx.initProducer()
	}
	if err := s.setupChunks(cfg.rxChunks(), cfg.txChunks()); err != nil {
		return err
	}
	if cfg.multiBuffer() {
		s.setMultiBuffer(cfg.MaxFrame)
	}
	if err := s.bind(cfg); err != nil {
		return err
	}
	if cfg.TxSize > 0 && cfg.TxBudget > 0 {
		// Best effort: kernels before 6.17 do not have the option.
		if unix.SetsockoptInt(s.fd, unix.SOL_XDP, xdpMaxTxSkbBudget, cfg.TxBudget) == nil {
			s.budget = cfg.TxBudget
		}
	}
	return nil
}

func (s *Socket) mapRing(o unix.XDPRingOffset, pgoff int64, size int, desc bool, name string) (*ring, error) {
	entry := uint64(addrEntrySize)
	if desc {
		entry = descEntrySize
	}
	length := o.Desc + uint64(size)*entry
	mem, err := unix.Mmap(s.fd, pgoff, int(length), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("xsk: queue %d: map %s ring: %w", s.queue, name, os.NewSyscallError("mmap", err))
	}
	s.maps = append(s.maps, mem)
	r, err := newRing(mem, ringOffsets{Producer: o.Producer, Consumer: o.Consumer, Desc: o.Desc, Flags: o.Flags}, size, desc)
	if err != nil {
		return nil, fmt.Errorf("xsk: queue %d: %s ring: %w", s.queue, name, err)
	}
	return r, nil
}

// bind binds with the flags of cfg.Bind, retrying EBUSY until the timeout.
func (s *Socket) bind(cfg Config) error {
	modes := []BindMode{cfg.Bind}
	if cfg.Bind == BindAuto {
		modes = []BindMode{BindZeroCopy, BindCopy}
	}
	var errs []error
	for _, m := range modes {
		flags := uint16(unix.XDP_COPY)
		if m == BindZeroCopy {
			flags = unix.XDP_ZEROCOPY
		}
		if s.wakeup {
			flags |= unix.XDP_USE_NEED_WAKEUP
		}
		if cfg.multiBuffer() {
			flags |= unix.XDP_USE_SG
		}
		err := bindRetry(s.fd, &unix.SockaddrXDP{Flags: flags, Ifindex: uint32(s.ifindex), QueueID: uint32(s.queue)}, cfg.BindTimeout)
		if err == nil {
			s.mode = m
			if opts, err := xdpOptions(s.fd); err == nil {
				s.mode = BindCopy
				if opts&xdpOptionsZeroCopy != 0 {
					s.mode = BindZeroCopy
				}
			}
			return nil
		}
		errs = append(errs, fmt.Errorf("%v mode: %w", m, err))
	}
	err := errs[0]
	if len(errs) == 2 {
		err = fmt.Errorf("%w; %w", errs[0], errs[1])
	}
	hint := ""
	switch {
	case errors.Is(err, unix.EBUSY):
		hint = fmt.Sprintf(": another socket still owns the queue after %v; close it or wait", cfg.BindTimeout)
	case errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO):
		hint = ": the interface does not exist in this network namespace"
	case cfg.multiBuffer() && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP)):
		hint = ": multi-buffer AF_XDP (Config.MaxFrame above a chunk) needs Linux 6.6 or later; or the queue may not exist (check `ethtool -l`)"
	case errors.Is(err, unix.EINVAL):
		hint = ": the queue may not exist (check `ethtool -l`) or the interface is down"
	case cfg.Bind == BindZeroCopy && errors.Is(err, unix.EOPNOTSUPP):
		hint = ": the driver has no zero-copy AF_XDP (veth never has): use BindAuto or BindCopy"
	}
	return fmt.Errorf("xsk: bind to interface %d queue %d: %w%s", s.ifindex, s.queue, err, hint)
}

func bindRetry(fd int, sa *unix.SockaddrXDP, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	wait := time.Millisecond
	for {
		err := unix.Bind(fd, sa)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return os.NewSyscallError("bind", err)
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// Stats reads the kernel's counters (XDP_STATISTICS) and adds this
// package's.
func (s *Socket) Stats() (Stats, error) {
	if s.closed {
		return Stats{}, ErrClosed
	}
	st, err := xdpStatistics(s.fd)
	if err != nil {
		return Stats{}, fmt.Errorf("xsk: queue %d: statistics: %w", s.queue, err)
	}
	out := s.localStats()
	out.RxDropped = st.Rx_dropped
	out.RxInvalidDescs = st.Rx_invalid_descs
	out.TxInvalidDescs = st.Tx_invalid_descs
	out.RxRingFull = st.Rx_ring_full
	out.RxFillRingEmptyDescs = st.Rx_fill_ring_empty_descs
	out.TxRingEmptyDescs = st.Tx_ring_empty_descs
	return out, nil
}

// Poll waits up to timeout for frames on the RX ring (poll(2) POLLIN); it
// reports whether there are some. A negative timeout waits forever.
func (s *Socket) Poll(timeout time.Duration) (bool, error) {
	if s.closed {
		return false, ErrClosed
	}
	fds := [1]unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}
	return pollFDs(fds[:], timeout)
}

func pollFDs(fds []unix.PollFd, timeout time.Duration) (bool, error) {
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	for {
		n, err := unix.Poll(fds, ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("xsk: %w", os.NewSyscallError("poll", err))
		}
		return n > 0, nil
	}
}

// Close closes the socket (which removes it from any XSKMAP) and unmaps
// its rings; it closes the UMEM too when NewSource created it.
func (s *Socket) Close() error {
	if s.closed {
		return nil
	}
	return s.release()
}

func (s *Socket) release() error {
	s.closed = true
	var errs []error
	if s.fd >= 0 {
		if err := unix.Close(s.fd); err != nil {
			errs = append(errs, os.NewSyscallError("close", err))
		}
		s.fd = -1
	}
	for _, m := range s.maps {
		if err := unix.Munmap(m); err != nil {
			errs = append(errs, os.NewSyscallError("munmap", err))
		}
	}
	s.maps = nil
	s.fill, s.comp, s.rx, s.tx = nil, nil, nil, nil
	s.umem.inUse.Store(false)
	if s.ownUMEM {
		errs = append(errs, s.umem.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("xsk: close queue %d: %w", s.queue, err)
	}
	return nil
}

// sysWakeRX asks the kernel to resume filling the RX ring
// (recvfrom with MSG_DONTWAIT, as the need_wakeup protocol wants).
func sysWakeRX(fd int) {
	_, _, _ = unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
}

// sysKickTX asks the kernel to transmit the TX ring (sendto with
// MSG_DONTWAIT). again reports whether another kick may make progress:
// false when the device is busy or out of buffers.
func sysKickTX(fd int) (again bool, err error) {
	_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	switch e {
	case 0, unix.EAGAIN, unix.EINTR:
		return true, nil
	case unix.EBUSY, unix.ENOBUFS:
		return false, nil
	case unix.ENETDOWN:
		return false, fmt.Errorf("%w: the interface is down", os.NewSyscallError("sendto", e))
	}
	return false, os.NewSyscallError("sendto", e)
}
