// Package pcapngtest reads the pcapng files that package pcapng writes,
// for tests (pcapng's and vnicctl dump's): in either byte order, skipping
// block types it does not know. It is not a general pcapng library.
package pcapngtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/vnic/vnic/internal/pcapng"
)

// Block types and option codes (draft-ietf-opsawg-pcapng), those that
// package pcapng writes.
const (
	blockSHB = 0x0A0D0D0A
	blockIDB = 0x00000001
	blockISB = 0x00000005
	blockEPB = 0x00000006

	byteOrderMagic = 0x1A2B3C4D

	optEnd     = 0
	optComment = 1
	// SHB
	optSHBHardware = 2
	optSHBOS       = 3
	optSHBUserAppl = 4
	// IDB
	optIfName        = 2
	optIfDescription = 3
	optIfTSResol     = 9
	// ISB
	optISBStartTime = 2
	optISBEndTime   = 3
	optISBIfRecv    = 4
	optISBIfDrop    = 5
)

// File is what Read returns: a capture's content.
type File struct {
	Section    pcapng.Section
	Interfaces []pcapng.Interface
	Packets    []pcapng.Packet
	Stats      []pcapng.Stats
}

// ErrFormat is wrapped by Read's errors about the stream's content.
var ErrFormat = errors.New("pcapng: malformed file")

// Read reads a whole pcapng stream (one or more sections; interface ids
// are those of the packet's section).
func Read(r io.Reader) (*File, error) {
	f := &File{}
	var bo binary.ByteOrder
	var tsres []time.Duration // per interface of the current section: one tick
	hdr := make([]byte, 8)
	for nblock := 0; ; nblock++ {
		if _, err := io.ReadFull(r, hdr); err != nil {
			if err == io.EOF && nblock > 0 {
				return f, nil
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return f, fmt.Errorf("%w: truncated block header after %d blocks", ErrFormat, nblock)
			}
			return f, err
		}
		typ := binary.LittleEndian.Uint32(hdr)
		if typ == blockSHB {
			// The byte order comes from the magic that follows the length.
			var m [4]byte
			if _, err := io.ReadFull(r, m[:]); err != nil {
				return f, fmt.Errorf("%w: truncated section header", ErrFormat)
			}
			switch binary.LittleEndian.Uint32(m[:]) {
			case byteOrderMagic:
				bo = binary.LittleEndian
			case 0x4D3C2B1A:
				bo = binary.BigEndian
			default:
				return f, fmt.Errorf("%w: section header without the byte-order magic", ErrFormat)
			}
			tsres = nil
			hdr = append(hdr[:8], m[:]...)
		} else if nblock == 0 {
			return f, fmt.Errorf("%w: does not start with a section header block (not a pcapng file?)", ErrFormat)
		} else {
			typ = bo.Uint32(hdr)
		}
		n := bo.Uint32(hdr[4:])
		if n < 12 || n%4 != 0 || n > pcapng.MaxBlock || int(n) < len(hdr)+4 {
			return f, fmt.Errorf("%w: block %d of type %#x has length %d", ErrFormat, nblock, typ, n)
		}
		blk := make([]byte, n)
		copy(blk, hdr)
		if _, err := io.ReadFull(r, blk[len(hdr):]); err != nil {
			return f, fmt.Errorf("%w: block %d truncated (%d bytes announced)", ErrFormat, nblock, n)
		}
		hdr = hdr[:8]
		if bo.Uint32(blk[n-4:]) != n {
			return f, fmt.Errorf("%w: block %d's trailing length %d differs from its leading %d", ErrFormat, nblock, bo.Uint32(blk[n-4:]), n)
		}
		body := blk[8 : n-4]
		switch typ {
		case blockSHB:
			if len(body) < 16 {
				return f, fmt.Errorf("%w: short section header", ErrFormat)
			}
			if major := bo.Uint16(body[4:]); major != 1 {
				return f, fmt.Errorf("%w: pcapng major version %d, want 1", ErrFormat, major)
			}
			f.Interfaces = f.Interfaces[:0]
			err := options(bo, body[16:], func(code uint16, v []byte) {
				switch code {
				case optComment:
					f.Section.Comment = string(v)
				case optSHBHardware:
					f.Section.Hardware = string(v)
				case optSHBOS:
					f.Section.OS = string(v)
				case optSHBUserAppl:
					f.Section.Application = string(v)
				}
			})
			if err != nil {
				return f, err
			}
		case blockIDB:
			if len(body) < 8 {
				return f, fmt.Errorf("%w: short interface description", ErrFormat)
			}
			i := pcapng.Interface{LinkType: bo.Uint16(body), Snaplen: bo.Uint32(body[4:]), TSResol: 6}
			err := options(bo, body[8:], func(code uint16, v []byte) {
				switch code {
				case optIfName:
					i.Name = string(v)
				case optIfDescription:
					i.Description = string(v)
				case optIfTSResol:
					if len(v) == 1 {
						i.TSResol = v[0]
					}
				}
			})
			if err != nil {
				return f, err
			}
			tick, err := resolution(i.TSResol)
			if err != nil {
				return f, err
			}
			f.Interfaces = append(f.Interfaces, i)
			tsres = append(tsres, tick)
		case blockEPB:
			if len(body) < 20 {
				return f, fmt.Errorf("%w: short enhanced packet block", ErrFormat)
			}
			id := bo.Uint32(body)
			if int(id) >= len(tsres) {
				return f, fmt.Errorf("%w: packet on interface %d, which was not described", ErrFormat, id)
			}
			capLen, orig := bo.Uint32(body[12:]), bo.Uint32(body[16:])
			if uint64(capLen) > uint64(len(body)-20) {
				return f, fmt.Errorf("%w: packet of %d captured bytes in a block of %d", ErrFormat, capLen, n)
			}
			p := pcapng.Packet{Interface: int(id), Time: stamp(bo, body[4:], tsres[id]), OrigLen: int(orig), Data: body[20 : 20+capLen]}
			padded := (int(capLen) + 3) &^ 3
			if padded <= len(body)-20 {
				if err := options(bo, body[20+padded:], func(code uint16, v []byte) {
					if code == optComment {
						p.Comment = string(v)
					}
				}); err != nil {
					return f, err
				}
			}
			f.Packets = append(f.Packets, p)
		case blockISB:
			if len(body) < 12 {
				return f, fmt.Errorf("%w: short interface statistics block", ErrFormat)
			}
			id := bo.Uint32(body)
			if int(id) >= len(tsres) {
				return f, fmt.Errorf("%w: statistics of interface %d, which was not described", ErrFormat, id)
			}
			s := pcapng.Stats{Interface: int(id), Time: stamp(bo, body[4:], tsres[id])}
			err := options(bo, body[12:], func(code uint16, v []byte) {
				if len(v) != 8 {
					return
				}
				switch code {
				case optISBStartTime:
					s.Start = stamp(bo, v, tsres[id])
				case optISBEndTime:
					s.End = stamp(bo, v, tsres[id])
				case optISBIfRecv:
					s.Received = bo.Uint64(v)
				case optISBIfDrop:
					s.Dropped = bo.Uint64(v)
				}
			})
			if err != nil {
				return f, err
			}
			f.Stats = append(f.Stats, s)
		}
	}
}

// resolution reads if_tsresol: a power of ten (or of two, high bit set)
// fraction of a second; finer than a nanosecond is refused.
func resolution(r uint8) (time.Duration, error) {
	if r&0x80 != 0 {
		if r&0x7f > 30 {
			return 0, fmt.Errorf("%w: timestamp resolution 2^-%d s is finer than this reader supports", ErrFormat, r&0x7f)
		}
		return time.Second >> (r & 0x7f), nil // approximate for the reader's purposes
	}
	if r > 9 {
		return 0, fmt.Errorf("%w: timestamp resolution 10^-%d s is finer than a nanosecond", ErrFormat, r)
	}
	d := time.Second
	for ; r > 0; r-- {
		d /= 10
	}
	return d, nil
}

func stamp(bo binary.ByteOrder, b []byte, tick time.Duration) time.Time {
	v := uint64(bo.Uint32(b))<<32 | uint64(bo.Uint32(b[4:]))
	if tick == time.Nanosecond {
		return time.Unix(0, int64(v))
	}
	return time.Unix(0, 0).Add(time.Duration(v) * tick)
}

// options walks an option list.
func options(bo binary.ByteOrder, b []byte, fn func(code uint16, v []byte)) error {
	for len(b) >= 4 {
		code, l := bo.Uint16(b), int(bo.Uint16(b[2:]))
		if code == optEnd {
			return nil
		}
		if 4+l > len(b) {
			return fmt.Errorf("%w: option %d of %d bytes runs past its block", ErrFormat, code, l)
		}
		fn(code, b[4:4+l])
		b = b[min(len(b), 4+(l+3)&^3):]
	}
	return nil
}
