package proto

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"testing"
)

func encode(t Type, body []byte) []byte {
	msg := make([]byte, HeaderSize+len(body))
	binary.LittleEndian.PutUint32(msg[0:], Magic)
	binary.LittleEndian.PutUint16(msg[4:], Version)
	binary.LittleEndian.PutUint16(msg[6:], uint16(t))
	binary.LittleEndian.PutUint32(msg[8:], uint32(len(body)))
	copy(msg[HeaderSize:], body)
	return msg
}

// FuzzDecode feeds arbitrary datagrams to the decoder vnicd runs on every
// request, then the JSON decoding of each request body: nothing panics,
// a datagram decodes only if its header is right, and what decodes
// re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(encode(TAttach, []byte(`{"name":"a","queues":2,"match":{"proto":"udp","dst_port_lo":7}}`)))
	f.Add(encode(TStats, []byte(`{"live":3,"hist":9,"done":true}`)))
	f.Add(encode(TStatus, nil))
	f.Add(encode(TTenants, []byte(`null`)))
	f.Add([]byte("VNIC"))
	f.Add(encode(TAttach, []byte(`{"ax_size":4294967424,"buffers":-1}`)))
	f.Fuzz(func(t *testing.T, msg []byte) {
		typ, body, err := Decode(msg)
		if err != nil {
			if body != nil {
				t.Fatal("error with a body")
			}
			return
		}
		if len(msg) < HeaderSize || binary.LittleEndian.Uint32(msg) != Magic {
			t.Fatal("decoded a datagram without the magic")
		}
		if !bytes.Equal(encode(typ, body), msg) {
			t.Fatal("decode then encode changed the datagram")
		}
		var a Attach
		_ = json.Unmarshal(body, &a)
		var p Page
		_ = json.Unmarshal(body, &p)
	})
}

func TestDecodeErrors(t *testing.T) {
	good := encode(TStatus, []byte(`{}`))
	if typ, body, err := Decode(good); err != nil || typ != TStatus || string(body) != `{}` {
		t.Fatalf("%v %q %v", typ, body, err)
	}
	bad := append([]byte(nil), good...)
	binary.LittleEndian.PutUint16(bad[4:], Version+1)
	if _, _, err := Decode(bad); !errors.Is(err, ErrVersion) {
		t.Fatalf("version: %v", err)
	}
	bad = append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(bad[8:], 1<<31)
	if _, _, err := Decode(bad); err == nil {
		t.Fatal("a length that disagrees was accepted")
	}
	if _, _, err := Decode(good[:5]); err == nil {
		t.Fatal("a short datagram was accepted")
	}
}

// TestRecvRefusesLargeBeforeReading: a server connection learns a
// datagram's length without reading it and refuses one over its limit; the
// next datagram is read normally.
func TestRecvRefusesLargeBeforeReading(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cl, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sc, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServerConn(sc, 1024)
	defer srv.Close()
	if _, err := cl.Unix().Write(encode(TStatus, make([]byte, 4096))); err != nil {
		t.Fatal(err)
	}
	if err := cl.Send(TStatus, map[string]int{"x": 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := srv.Recv(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized datagram: %v", err)
	}
	typ, body, _, err := srv.Recv()
	if err != nil || typ != TStatus || string(body) != `{"x":1}` {
		t.Fatalf("next datagram: %v %q %v", typ, body, err)
	}
}

func TestMatchString(t *testing.T) {
	for _, tc := range []struct {
		m    Match
		want string
	}{
		{Match{}, "any"},
		{Match{Default: true}, "default"},
		{Match{Proto: "UDP", DstPortLo: 7000}, "udp dport 7000"},
		{Match{Proto: "tcp", DstPortLo: 80, DstPortHi: 80}, "tcp dport 80"},
		{Match{Proto: "udp", DstPortLo: 7000, DstPortHi: 7001, Dst: "198.19.0.0/16"}, "udp dport 7000-7001 dst 198.19.0.0/16"},
		{Match{DstPortHi: 9}, "dport 0-9"},
		{Match{Dst: "198.18.0.1", Default: true}, "dst 198.18.0.1 default"},
	} {
		if got := tc.m.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.m, got, tc.want)
		}
	}
}
