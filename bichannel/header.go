package bichannel

import (
	"encoding/binary"

	"github.com/vnic/vnic/bichannel/transport"
)

// A datagram holds one or more records back to back, each a header and
// its payload, each checked on its own. The tag is zero outside the
// authenticated mode.
//
//	0  magic 0xB1C4      2  version  3  type (1 data, 2 hot ack, 3 credit)
//	4  node (u32)        8  session (u64)
//	16 worker (u16)      18 flow (u16)
//	20 sequence (u64)    28 payload length (u16)
//	30 credits the message spent (u16; data records, else zero)
//	32 tag (u64, little-endian SipHash output)     40 payload
const (
	// HeaderLen is the size of the header in front of each message's
	// payload in a fast-path datagram.
	HeaderLen = 40

	dgMagic   = 0xB1C4
	dgVersion = 4
	dgData    = 1
	dgAck     = 2  // a hot-path acknowledgement (ack.go)
	dgCredit  = 3  // credits returned on the fast path (ack.go)
	tagOff    = 32 // the header's tag; the tag covers b[:tagOff] and the payload
)

type dgHeader struct {
	node    uint32
	session uint64
	worker  uint16
	flow    uint16
	seq     uint64
	length  uint16
	units   uint16 // dgData: the credits the message spent
	tag     uint64
	typ     byte // dgData, dgAck or dgCredit
}

// putHeader writes h into b[:HeaderLen], with a zero tag (signDatagram
// sets it).
func putHeader(b []byte, h *dgHeader) {
	_ = b[HeaderLen-1]
	binary.BigEndian.PutUint16(b[0:], dgMagic)
	b[2] = dgVersion
	b[3] = dgData
	binary.BigEndian.PutUint32(b[4:], h.node)
	binary.BigEndian.PutUint64(b[8:], h.session)
	binary.BigEndian.PutUint16(b[16:], h.worker)
	binary.BigEndian.PutUint16(b[18:], h.flow)
	binary.BigEndian.PutUint64(b[20:], h.seq)
	binary.BigEndian.PutUint16(b[28:], h.length)
	binary.BigEndian.PutUint16(b[30:], h.units)
	binary.LittleEndian.PutUint64(b[tagOff:], 0)
}

// parseHeader decodes a datagram of one record and returns its payload.
func parseHeader(b []byte, h *dgHeader) ([]byte, bool) {
	rec, rest, ok := nextRecord(b, h)
	if !ok || len(rest) != 0 {
		return nil, false // truncated or padded: not ours
	}
	return rec[HeaderLen:], true
}

// nextRecord decodes the header of the record at the head of b and returns
// the record (header and payload) and what follows it.
func nextRecord(b []byte, h *dgHeader) (rec, rest []byte, ok bool) {
	if len(b) < HeaderLen || binary.BigEndian.Uint16(b) != dgMagic || b[2] != dgVersion || b[3] < dgData || b[3] > dgCredit {
		return nil, nil, false
	}
	h.typ = b[3]
	h.node = binary.BigEndian.Uint32(b[4:])
	h.session = binary.BigEndian.Uint64(b[8:])
	h.worker = binary.BigEndian.Uint16(b[16:])
	h.flow = binary.BigEndian.Uint16(b[18:])
	h.seq = binary.BigEndian.Uint64(b[20:])
	h.length = binary.BigEndian.Uint16(b[28:])
	h.units = binary.BigEndian.Uint16(b[30:])
	h.tag = binary.LittleEndian.Uint64(b[tagOff:])
	n := HeaderLen + int(h.length)
	if n > len(b) {
		return nil, nil, false // truncated
	}
	return b[:n], b[n:], true
}

// signDatagram sets the tag of a datagram built by putHeader.
func signDatagram(k sipKey, b []byte) {
	binary.LittleEndian.PutUint64(b[tagOff:], k.sum2(b[:tagOff], b[HeaderLen:]))
}

// tagOK tells whether a datagram's tag is k's over its header and payload.
func tagOK(k sipKey, b []byte, tag uint64) bool {
	// One 64-bit comparison: no early exit on a partial match.
	return k.sum2(b[:tagOff], b[HeaderLen:])^tag == 0
}

// transport cannot import this package, so it states the default datagram
// size itself; this fails to compile when the two disagree.
var _ = [1]struct{}{}[transport.DefaultMaxDatagram-(HeaderLen+DefaultMaxPayload)]
