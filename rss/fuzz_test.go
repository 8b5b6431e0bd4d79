package rss

import (
	"errors"
	"testing"
)

var malformedReasons = []error{
	ErrTruncatedEthernet, ErrTruncatedVLAN, ErrTooManyVLANs, ErrBadEtherType,
	ErrBadIPVersion, ErrTruncatedIPv4, ErrBadIPv4HeaderLen, ErrBadIPv4TotalLen,
	ErrTruncatedIPv6, ErrBadIPv6PayloadLen, ErrTruncatedExtHeader,
	ErrTooManyExtHeaders, ErrTruncatedL4, ErrBadTCPHeaderLen, ErrBadUDPLen, ErrFragmentTooLong,
}

func FuzzParse(f *testing.F) {
	for _, c := range parseCases() {
		f.Add(c.frame)
	}
	h, err := NewHasher(MicrosoftKey)
	if err != nil {
		f.Fatal(err)
	}
	padding := make([]byte, 64)
	for i := range padding {
		padding[i] = 0xa5
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		checkFastPath(t, frame)
		var tup Tuple
		err := Parse(frame, &tup)

		// Parse must not read past the packet: trailing bytes never change a
		// success or a non-IP verdict.
		var padded Tuple
		perr := Parse(append(frame[:len(frame):len(frame)], padding...), &padded)

		if err != nil {
			if tup != (Tuple{}) {
				t.Fatalf("tuple not zeroed on error %v: %+v", err, tup)
			}
			if errors.Is(err, ErrNotIP) {
				if errors.Is(err, ErrMalformed) {
					t.Fatal("ErrNotIP wraps ErrMalformed")
				}
				if perr != err {
					t.Fatalf("padding changed ErrNotIP into %v", perr)
				}
				return
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is neither ErrNotIP nor ErrMalformed", err)
			}
			known := false
			for _, r := range malformedReasons {
				known = known || err == r
			}
			if !known {
				t.Fatalf("error %v is not one of the exported reasons", err)
			}
			return
		}

		if perr != nil || padded != tup {
			t.Fatalf("padding changed the result: %+v, %v; padded %+v, %v", tup, err, padded, perr)
		}
		minLen := etherHdrLen + ipv4MinHdr
		if tup.IPv6 {
			minLen = etherHdrLen + ipv6HdrLen
		} else if [12]byte(tup.Src[4:]) != [12]byte{} || [12]byte(tup.Dst[4:]) != [12]byte{} {
			t.Fatalf("IPv4 tuple with bytes past the address: %+v", tup)
		}
		if tup.HasPorts {
			if tup.Fragment {
				t.Fatalf("fragment with ports: %+v", tup)
			}
			switch tup.Proto {
			case ProtoUDP:
				minLen += udpHdrLen
			case ProtoTCP:
				minLen += tcpMinHdr
			default:
				t.Fatalf("ports for protocol %d", tup.Proto)
			}
		} else if tup.SrcPort != 0 || tup.DstPort != 0 {
			t.Fatalf("ports without HasPorts: %+v", tup)
		}
		if !tup.HasPorts && !tup.Fragment && (tup.Proto == ProtoTCP || tup.Proto == ProtoUDP) {
			t.Fatalf("unfragmented TCP/UDP parsed without ports: %+v", tup)
		}
		if len(frame) < minLen {
			t.Fatalf("frame of %d bytes parsed as %+v (needs at least %d)", len(frame), tup, minLen)
		}
		var buf [MaxInputLen]byte
		in := tup.Input(&buf)
		if got, want := h.HashTuple(&tup), ToeplitzRef(MicrosoftKey, in); got != want {
			t.Fatalf("HashTuple %#08x, ToeplitzRef %#08x", got, want)
		}
	})
}
