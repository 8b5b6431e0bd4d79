package rss

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Hash profile names, as ParseProfile accepts them and MarshalBinary writes
// them.
const (
	// ProfileToeplitz is Microsoft's Toeplitz hash over (source address,
	// destination address, source port, destination port) with the
	// receiver's key, as most NICs and the DPDK and FreeBSD ENA drivers
	// compute it.
	ProfileToeplitz = "toeplitz"

	// ProfileENAFixed is the hash of AWS ENA devices whose key cannot be
	// changed (the hardware default): Toeplitz with ENAFixedKey and an
	// initial value of 0xffffffff over the addresses and the ports each put
	// in ascending order, so both directions of a flow hash alike; the low
	// 16 bits of the result are copied into the high 16 bits.
	//
	// Source: AWS's calculator ena-toeplitz/toeplitz_calc.py in
	// github.com/amzn/amzn-ec2-ena-utilities, which the ENA DPDK
	// documentation (amzn-drivers userspace/dpdk/README.md, "RSS") and
	// the Linux best-practices guide (amzn-drivers
	// kernel/linux/ena/ENA_Linux_Best_Practices.rst, "Configuring RSS")
	// point to as "the hash calculation that is done in HW". The
	// calculator is IPv4-only; for IPv6 this profile applies the same rule
	// to the 16-byte addresses, which no AWS document confirms. ENA steers
	// packets other than unfragmented TCP and UDP to queue 0 without
	// hashing them (ENA DPDK documentation, "RSS hash fields"), so the
	// address-only hash this profile gives such tuples predicts nothing.
	ProfileENAFixed = "ena-fixed"

	// ProfileENALinux is the hash of AWS ENA devices with a configurable
	// key driven by the Linux (newer than v2.6.0g) or Windows driver: the
	// device uses the key bytes in reverse order and an initial value of
	// 0xffffffff. The key is the one `ethtool -x` shows. (Linux drivers
	// v2.2.11g to v2.6.0g start from 0 until the key is first set with
	// ethtool; with the DPDK and FreeBSD drivers the hash is ProfileToeplitz.)
	// Source: toeplitz_calc.py and ENA_Linux_Best_Practices.rst as above.
	ProfileENALinux = "ena-linux"
)

// maxProfileName bounds the profile name in the wire form.
const maxProfileName = 32

// ENAFixedKey is the key of AWS ENA devices whose key cannot be changed
// (ProfileENAFixed): MicrosoftKey with its ten 32-bit words in reverse
// order, as AWS's toeplitz_calc.py (RSS_DEFAULT_KEY) and the ENA DPDK
// documentation ("RSS hash key update": "Before ENA v2.4.0, the HW used the
// static key") give it. Treat it as read-only.
var ENAFixedKey = Key{
	0xbe, 0xac, 0x01, 0xfa, 0x6a, 0x42, 0xb7, 0x3b,
	0x80, 0x30, 0xf2, 0x0c, 0x77, 0xcb, 0x2d, 0xa3,
	0xae, 0x7b, 0x30, 0xb4, 0xd0, 0xca, 0x2b, 0xcb,
	0x43, 0xa3, 0x8f, 0xb0, 0x41, 0x67, 0x25, 0x3d,
	0x25, 0x5b, 0x0e, 0xc2, 0x6d, 0x5a, 0x56, 0xda,
}

type profileKind uint8

const (
	kindToeplitz profileKind = iota + 1
	kindENAFixed
	kindENALinux
)

// Profile describes how a receiver's NIC hashes a flow, so that a sender can
// predict the hash (and with the receiver's RETA, the queue) of the packets
// it sends. Build one with ParseProfile or UnmarshalBinary, which also build
// the lookup tables Hash uses; treat Name and Key as read-only afterwards
// (call ParseProfile again to change them). A Profile is safe for
// concurrent use.
type Profile struct {
	// Name is one of ProfileToeplitz, ProfileENAFixed, ProfileENALinux.
	Name string
	// Key is the receiver's key as its driver reports it (`ethtool -x`);
	// for ProfileENAFixed it is ENAFixedKey.
	Key Key

	kind profileKind
	h    *Hasher // over the key the hardware uses
}

// ParseProfile returns the profile called name (case-insensitive) with the
// receiver's key. A nil key means MicrosoftKey for "toeplitz" and
// ENAFixedKey for "ena-fixed", which accepts no other key; "ena-linux" needs
// the key `ethtool -x` shows on the receiver. The key is copied.
func ParseProfile(name string, key Key) (Profile, error) {
	kind, name, err := profileKindOf(name)
	if err != nil {
		return Profile{}, err
	}
	if key == nil {
		switch kind {
		case kindToeplitz:
			key = MicrosoftKey
		case kindENAFixed:
			key = ENAFixedKey
		case kindENALinux:
			return Profile{}, errors.New("rss: profile ena-linux needs the receiver's key: give the key `ethtool -x` shows on the receiver")
		}
	}
	if err := checkProfileKey(kind, key); err != nil {
		return Profile{}, err
	}
	p := Profile{Name: name, Key: append(Key(nil), key...), kind: kind}
	hwKey := p.Key
	if kind == kindENALinux {
		// The device uses the key bytes in reverse order.
		hwKey = append(Key(nil), key...)
		for i, j := 0, len(hwKey)-1; i < j; i, j = i+1, j-1 {
			hwKey[i], hwKey[j] = hwKey[j], hwKey[i]
		}
	}
	h, err := NewHasher(hwKey)
	if err != nil {
		return Profile{}, fmt.Errorf("rss: profile %s: %w", name, err)
	}
	p.h = h
	return p, nil
}

// profileKindOf resolves a profile name and returns its canonical spelling.
func profileKindOf(name string) (profileKind, string, error) {
	switch n := strings.ToLower(strings.TrimSpace(name)); n {
	case ProfileToeplitz:
		return kindToeplitz, n, nil
	case ProfileENAFixed:
		return kindENAFixed, n, nil
	case ProfileENALinux:
		return kindENALinux, n, nil
	}
	return 0, "", fmt.Errorf("rss: unknown hash profile %q: use %s, %s or %s", name, ProfileToeplitz, ProfileENAFixed, ProfileENALinux)
}

func checkProfileKey(kind profileKind, key Key) error {
	if kind == kindENAFixed && !bytes.Equal(key, ENAFixedKey) {
		return errors.New("rss: profile ena-fixed uses the key fixed in the hardware (rss.ENAFixedKey): pass a nil key, or use profile ena-linux for a device whose key can be set")
	}
	if kind == kindENALinux && len(key) != KeyLen {
		return fmt.Errorf("rss: profile ena-linux: key is %d bytes, ENA keys are %d: give the key `ethtool -x` shows on the receiver", len(key), KeyLen)
	}
	if err := key.Validate(); err != nil {
		return fmt.Errorf("rss: profile: %w", err)
	}
	return nil
}

// Equal reports whether p and q hash alike: same name and same key.
func (p Profile) Equal(q Profile) bool {
	return p.Name == q.Name && bytes.Equal(p.Key, q.Key)
}

// String returns the profile name and, unless the key is fixed, the key.
func (p Profile) String() string {
	if p.kind == kindENAFixed || p.Name == ProfileENAFixed {
		return p.Name
	}
	return p.Name + " key " + p.Key.String()
}

// Hash returns the hash the receiver's NIC computes for t. It does not
// allocate. It panics if p was not made by ParseProfile or UnmarshalBinary
// (a Profile literal has no lookup tables): that is a programming error.
func (p Profile) Hash(t *Tuple) uint32 {
	return p.hash(t, p.kind == kindENAFixed)
}

// hash is Hash with the ascending-port rule of ProfileENAFixed applied only
// when sortPorts is set. The port picker solves over the ports as they enter
// the hash input (sortPorts false), where every profile is affine over GF(2).
func (p Profile) hash(t *Tuple, sortPorts bool) uint32 {
	if p.h == nil {
		panic("rss: Profile.Hash on a profile not made by rss.ParseProfile or UnmarshalBinary")
	}
	switch p.kind {
	case kindENAFixed:
		c := *t
		if bytes.Compare(c.Src[:], c.Dst[:]) > 0 {
			c.Src, c.Dst = c.Dst, c.Src
		}
		if sortPorts && c.SrcPort > c.DstPort {
			c.SrcPort, c.DstPort = c.DstPort, c.SrcPort
		}
		r := p.h.HashTuple(&c) ^ 0xffffffff
		return r&0xffff | r<<16
	case kindENALinux:
		return p.h.HashTuple(t) ^ 0xffffffff
	}
	return p.h.HashTuple(t)
}

// symmetricPorts reports whether the profile puts the ports in ascending
// order before hashing.
func (p Profile) symmetricPorts() bool { return p.kind == kindENAFixed }

// Wire form. Every form starts with a tag byte and a version byte; integers
// are big-endian.
//
//	profile: 'P' 1 | name length (1 byte) | name | key length (2) | key
//	config:  'C' 1 | name length (1 byte) | name | key length (2) | key |
//	         RETA size (4) | queue count (4) | size entries (2 bytes each)
const (
	tagProfile  = 'P'
	tagConfig   = 'C'
	wireVersion = 1
)

// MarshalBinary returns the wire form of p: its name and key. It fails if
// the name or the key is not valid.
func (p Profile) MarshalBinary() ([]byte, error) {
	return p.AppendBinary(nil)
}

// AppendBinary appends the wire form of p to b.
func (p Profile) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, tagProfile, wireVersion)
	return p.appendBody(b)
}

func (p Profile) appendBody(b []byte) ([]byte, error) {
	kind, name, err := profileKindOf(p.Name)
	if err != nil {
		return nil, err
	}
	if err := checkProfileKey(kind, p.Key); err != nil {
		return nil, err
	}
	b = append(b, byte(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(p.Key)))
	return append(b, p.Key...), nil
}

// UnmarshalBinary sets p from the wire form MarshalBinary writes. Input that
// is truncated, too long or invalid returns an error and leaves p unchanged.
func (p *Profile) UnmarshalBinary(data []byte) error {
	d := wireReader{b: data}
	if err := d.header(tagProfile, "profile"); err != nil {
		return err
	}
	q, err := d.profile()
	if err != nil {
		return err
	}
	if err := d.end("profile"); err != nil {
		return err
	}
	*p = q
	return nil
}

// Config is what a receiver ships to its senders over the bi-channel control
// connection so they can target its queues: how its NIC hashes and its
// indirection table.
type Config struct {
	Profile Profile
	RETA    *RETA
}

// MarshalBinary returns the wire form of c: the profile's name and key, the
// RETA size, the queue count and every RETA entry.
func (c Config) MarshalBinary() ([]byte, error) {
	return c.AppendBinary(nil)
}

// AppendBinary appends the wire form of c to b.
func (c Config) AppendBinary(b []byte) ([]byte, error) {
	if c.RETA == nil {
		return nil, errors.New("rss: config has no RETA: set Config.RETA (see rss.NewRETA)")
	}
	b = append(b, tagConfig, wireVersion)
	b, err := c.Profile.appendBody(b)
	if err != nil {
		return nil, err
	}
	size := c.RETA.Size()
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	b = binary.BigEndian.AppendUint32(b, uint32(c.RETA.Queues()))
	for i := range size {
		b = binary.BigEndian.AppendUint16(b, uint16(c.RETA.Entry(i)))
	}
	return b, nil
}

// UnmarshalBinary sets c from the wire form MarshalBinary writes, with a new
// RETA. Input that is truncated, too long or invalid (unknown version or
// profile, bad key length, a RETA size that is not a power of two, an entry
// past the queue count) returns an error and leaves c unchanged.
func (c *Config) UnmarshalBinary(data []byte) error {
	d := wireReader{b: data}
	if err := d.header(tagConfig, "config"); err != nil {
		return err
	}
	p, err := d.profile()
	if err != nil {
		return err
	}
	size, ok1 := d.u32()
	queues, ok2 := d.u32()
	if !ok1 || !ok2 {
		return d.short("config", "RETA size and queue count")
	}
	if size < 1 || size > MaxRETASize || size&(size-1) != 0 {
		return fmt.Errorf("rss: config: RETA size %d is not a power of two from 1 to %d: the sender's data is corrupt or from an incompatible version", size, MaxRETASize)
	}
	if queues < 1 || queues > MaxQueues {
		return fmt.Errorf("rss: config: %d queues, want 1 to %d: the sender's data is corrupt or from an incompatible version", queues, MaxQueues)
	}
	if len(d.b) < 2*int(size) {
		return d.short("config", fmt.Sprintf("%d RETA entries", size))
	}
	reta, err := NewRETA(int(size), int(queues))
	if err != nil {
		return fmt.Errorf("rss: config: %w", err)
	}
	for i := range int(size) {
		q, _ := d.u16()
		if uint32(q) >= queues {
			return fmt.Errorf("rss: config: RETA entry %d points at queue %d of %d: the sender's data is corrupt", i, q, queues)
		}
		reta.tab[i] = q
	}
	if err := d.end("config"); err != nil {
		return err
	}
	c.Profile, c.RETA = p, reta
	return nil
}

// wireReader consumes a wire form front to back.
type wireReader struct {
	b []byte
	n int // bytes consumed, for error messages
}

func (d *wireReader) take(n int) ([]byte, bool) {
	if n < 0 || len(d.b) < n {
		return nil, false
	}
	v := d.b[:n]
	d.b = d.b[n:]
	d.n += n
	return v, true
}

func (d *wireReader) u16() (uint16, bool) {
	v, ok := d.take(2)
	if !ok {
		return 0, false
	}
	return binary.BigEndian.Uint16(v), true
}

func (d *wireReader) u32() (uint32, bool) {
	v, ok := d.take(4)
	if !ok {
		return 0, false
	}
	return binary.BigEndian.Uint32(v), true
}

func (d *wireReader) short(what, field string) error {
	return fmt.Errorf("rss: %s: data ends after %d bytes, before the %s: the message was truncated", what, d.n, field)
}

func (d *wireReader) header(tag byte, what string) error {
	h, ok := d.take(2)
	if !ok {
		return d.short(what, "header")
	}
	if h[0] != tag {
		return fmt.Errorf("rss: %s: data starts with tag %#02x, not %#02x (%q): this is not an encoded %s", what, h[0], tag, tag, what)
	}
	if h[1] != wireVersion {
		return fmt.Errorf("rss: %s: wire version %d, this build reads version %d: run the same vnic version on both ends", what, h[1], wireVersion)
	}
	return nil
}

func (d *wireReader) profile() (Profile, error) {
	n, ok := d.take(1)
	if !ok {
		return Profile{}, d.short("profile", "name length")
	}
	if n[0] == 0 || n[0] > maxProfileName {
		return Profile{}, fmt.Errorf("rss: profile: name length %d, want 1 to %d: the data is corrupt", n[0], maxProfileName)
	}
	name, ok := d.take(int(n[0]))
	if !ok {
		return Profile{}, d.short("profile", "name")
	}
	kl, ok := d.u16()
	if !ok {
		return Profile{}, d.short("profile", "key length")
	}
	if kl < KeyLen || kl > MaxKeyLen {
		return Profile{}, fmt.Errorf("rss: profile: key length %d, want %d to %d: the data is corrupt", kl, KeyLen, MaxKeyLen)
	}
	key, ok := d.take(int(kl))
	if !ok {
		return Profile{}, d.short("profile", "key")
	}
	// The name must be spelled exactly as MarshalBinary writes it, so the
	// wire form of a value is unique.
	if _, canon, err := profileKindOf(string(name)); err != nil || canon != string(name) {
		return Profile{}, fmt.Errorf("rss: profile: unknown hash profile %q: use %s, %s or %s (or update vnic on this end)", name, ProfileToeplitz, ProfileENAFixed, ProfileENALinux)
	}
	return ParseProfile(string(name), Key(key))
}

func (d *wireReader) end(what string) error {
	if len(d.b) != 0 {
		return fmt.Errorf("rss: %s: %d bytes left over after %d: the data is corrupt or from a newer version", what, len(d.b), d.n)
	}
	return nil
}
