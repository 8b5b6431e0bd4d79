package rss

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"testing/iotest"
)

// msVectors is Microsoft's RSS verification suite ("Verifying the RSS Hash
// Calculation", Windows driver docs), computed with MicrosoftKey. The "only"
// column hashes the addresses, the "tcp" column addresses and ports.
var msVectors = []struct {
	dst, src  string
	only, tcp uint32
}{
	// IPv4
	{"161.142.100.80:1766", "66.9.149.187:2794", 0x323e8fc2, 0x51ccc178},
	{"65.69.140.83:4739", "199.92.111.2:14230", 0xd718262a, 0xc626b0ea},
	{"12.22.207.184:38024", "24.19.198.95:12898", 0xd2d0a5de, 0x5c2b394a},
	{"209.142.163.6:2217", "38.27.205.30:48228", 0x82989176, 0xafc7327f},
	{"202.188.127.2:1303", "153.39.163.191:44251", 0x5d1809c5, 0x10e828a2},
	// IPv6
	{"[3ffe:2501:200:3::1]:1766", "[3ffe:2501:200:1fff::7]:2794", 0x2cc18cd5, 0x40207d3d},
	{"[ff02::1]:4739", "[3ffe:501:8::260:97ff:fe40:efab]:14230", 0x0f0c461c, 0xdde51bbf},
	{"[fe80::200:f8ff:fe21:67cf]:38024", "[3ffe:1900:4545:3:200:f8ff:fe21:67cf]:44251", 0x4b61e985, 0x02d1feef},
}

func TestMicrosoftVectors(t *testing.T) {
	h, err := NewHasher(MicrosoftKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range msVectors {
		src, dst := netip.MustParseAddrPort(v.src), netip.MustParseAddrPort(v.dst)
		t.Run(v.src+">"+v.dst, func(t *testing.T) {
			only, err := NewAddrTuple(src.Addr(), dst.Addr())
			if err != nil {
				t.Fatal(err)
			}
			tcp, err := NewTuple(ProtoTCP, src.Addr(), dst.Addr(), src.Port(), dst.Port())
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name string
				tup  Tuple
				want uint32
			}{{"addresses", only, v.only}, {"tcp", tcp, v.tcp}} {
				var buf [MaxInputLen]byte
				in := c.tup.Input(&buf)
				if got := h.HashTuple(&c.tup); got != c.want {
					t.Errorf("%s: HashTuple = %#08x, want %#08x", c.name, got, c.want)
				}
				if got := h.Hash(in); got != c.want {
					t.Errorf("%s: Hash = %#08x, want %#08x", c.name, got, c.want)
				}
				if got := ToeplitzRef(MicrosoftKey, in); got != c.want {
					t.Errorf("%s: ToeplitzRef = %#08x, want %#08x", c.name, got, c.want)
				}
			}
			// UDP is hashed on the 4-tuple exactly like TCP.
			udp, _ := NewTuple(ProtoUDP, src.Addr(), dst.Addr(), src.Port(), dst.Port())
			if got := h.HashTuple(&udp); got != v.tcp {
				t.Errorf("udp: HashTuple = %#08x, want %#08x", got, v.tcp)
			}
			if src.Addr().Is4() {
				var buf [MaxInputLen]byte
				in := tcp.Input(&buf)
				if len(in) != 12 {
					t.Fatalf("IPv4 4-tuple input is %d bytes", len(in))
				}
				if got := h.HashIPv4Ports((*[12]byte)(in)); got != v.tcp {
					t.Errorf("HashIPv4Ports = %#08x, want %#08x", got, v.tcp)
				}
			}
		})
	}
}

// TestHashMatchesRef cross-checks the table-driven hash against the bit-by-bit
// reference on random keys (standard and longer) and random inputs, including
// inputs longer than the key.
func TestHashMatchesRef(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, klen := range []int{KeyLen, 41, 52, 64} {
		key := make(Key, klen)
		for i := range key {
			key[i] = byte(rng.Uint32())
		}
		h, err := NewHasher(key)
		if err != nil {
			t.Fatal(err)
		}
		for range 2000 {
			in := make([]byte, rng.IntN(klen+8))
			for i := range in {
				in[i] = byte(rng.Uint32())
			}
			if got, want := h.Hash(in), ToeplitzRef(key, in); got != want {
				t.Fatalf("key %x input %x: Hash = %#08x, ToeplitzRef = %#08x", key, in, got, want)
			}
		}
	}
}

// TestHashLinear checks the GF(2) linearity PortPicker relies on:
// H(a xor b) = H(a) xor H(b) for equal-length inputs.
func TestHashLinear(t *testing.T) {
	h, _ := NewHasher(MicrosoftKey)
	rng := rand.New(rand.NewPCG(3, 4))
	a, b, c := make([]byte, MaxInputLen), make([]byte, MaxInputLen), make([]byte, MaxInputLen)
	for range 1000 {
		for i := range a {
			a[i], b[i] = byte(rng.Uint32()), byte(rng.Uint32())
			c[i] = a[i] ^ b[i]
		}
		if h.Hash(c) != h.Hash(a)^h.Hash(b) {
			t.Fatalf("hash is not linear for %x, %x", a, b)
		}
	}
}

func TestSymmetricKey(t *testing.T) {
	h, err := NewHasher(SymmetricKey())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 1000 {
		var tup Tuple
		tup.IPv6 = i%2 == 1
		for j := range tup.Src {
			tup.Src[j], tup.Dst[j] = byte(rng.Uint32()), byte(rng.Uint32())
		}
		if !tup.IPv6 {
			clear(tup.Src[4:])
			clear(tup.Dst[4:])
		}
		tup.HasPorts = i%3 != 0
		tup.SrcPort, tup.DstPort = uint16(rng.Uint32()), uint16(rng.Uint32())
		rev := tup.Reverse()
		if a, b := h.HashTuple(&tup), h.HashTuple(&rev); a != b {
			t.Fatalf("%v: %#08x, reversed %#08x", tup.String(), a, b)
		}
	}
	// The Microsoft key is not symmetric.
	hm, _ := NewHasher(MicrosoftKey)
	tup, _ := NewTuple(ProtoUDP, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), 1, 2)
	rev := tup.Reverse()
	if hm.HashTuple(&tup) == hm.HashTuple(&rev) {
		t.Error("MicrosoftKey unexpectedly symmetric for this tuple")
	}
}

func TestNewHasherRejectsBadKeys(t *testing.T) {
	for _, n := range []int{0, 1, 39, MaxKeyLen + 1} {
		_, err := NewHasher(make(Key, n))
		if err == nil {
			t.Errorf("NewHasher(%d-byte key) succeeded", n)
			continue
		}
		if !strings.HasPrefix(err.Error(), "new hasher: key is") {
			t.Errorf("NewHasher(%d-byte key): unexpected error %q", n, err)
		}
	}
	if _, err := NewHasher(make(Key, MaxKeyLen)); err != nil {
		t.Errorf("NewHasher(%d-byte key): %v", MaxKeyLen, err)
	}
}

func TestHasherCopiesKey(t *testing.T) {
	k := SymmetricKey()
	h, _ := NewHasher(k)
	in := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	want := h.Hash(in)
	k[0] ^= 0xff
	if h.Hash(in) != want {
		t.Error("modifying the key after NewHasher changed the hash")
	}
	if !bytes.Equal(h.Key(), SymmetricKey()) {
		t.Errorf("Key() = %v", h.Key())
	}
}

func TestParseKey(t *testing.T) {
	ms := MicrosoftKey.String()
	for _, c := range []struct {
		in   string
		want Key
	}{
		{"microsoft", MicrosoftKey},
		{"Default", MicrosoftKey},
		{" symmetric ", SymmetricKey()},
		{ms, MicrosoftKey},
		{strings.ReplaceAll(ms, ":", ""), MicrosoftKey},
		{"0x" + strings.ReplaceAll(ms, ":", ""), MicrosoftKey},
		{strings.ToUpper(ms), MicrosoftKey},
	} {
		got, err := ParseKey(c.in)
		if err != nil {
			t.Errorf("ParseKey(%q): %v", c.in, err)
			continue
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("ParseKey(%q) = %v, want %v", c.in, got, c.want)
		}
	}
	// The returned key is a copy.
	k, _ := ParseKey("microsoft")
	k[0] = 0
	if MicrosoftKey[0] != 0x6d {
		t.Fatal("ParseKey returned MicrosoftKey itself")
	}

	r1, err := ParseKey("random")
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := ParseKey("random")
	if len(r1) != KeyLen || bytes.Equal(r1, r2) {
		t.Errorf("random keys %v, %v", r1, r2)
	}

	for _, bad := range []string{"", "micro", "6d:5a", "zz" + ms[2:], ms[:len(ms)-3], ms + ":0"} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) succeeded", bad)
		} else if !strings.HasPrefix(err.Error(), "parse key") {
			t.Errorf("ParseKey(%q): unexpected error %q", bad, err)
		}
	}
}

func TestRandomKey(t *testing.T) {
	src := bytes.Repeat([]byte{0xab}, 64)
	k, err := RandomKey(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k, src[:KeyLen]) {
		t.Errorf("RandomKey = %v", k)
	}
	if _, err := RandomKey(iotest.ErrReader(errors.New("boom"))); err == nil || !strings.HasPrefix(err.Error(), "random key: ") {
		t.Errorf("RandomKey(failing reader) error = %v", err)
	}
	if _, err := RandomKey(bytes.NewReader(src[:10])); err == nil {
		t.Error("RandomKey(short reader) succeeded")
	}
}

func TestKeyString(t *testing.T) {
	const want = "6d:5a:56:da:25:5b:0e:c2:41:67:25:3d:43:a3:8f:b0:d0:ca:2b:cb:ae:7b:30:b4:77:cb:2d:a3:80:30:f2:0c:6a:42:b7:3b:be:ac:01:fa"
	if got := MicrosoftKey.String(); got != want {
		t.Errorf("String() = %s", got)
	}
}

func TestAllocsHash(t *testing.T) {
	h, _ := NewHasher(MicrosoftKey)
	v4, _ := NewTuple(ProtoUDP, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), 1234, 5678)
	v6, _ := NewTuple(ProtoTCP, netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), 1234, 5678)
	in := make([]byte, MaxInputLen)
	var sink uint32
	if n := testing.AllocsPerRun(100, func() { sink ^= h.Hash(in) }); n != 0 {
		t.Errorf("Hash: %v allocs", n)
	}
	if n := testing.AllocsPerRun(100, func() { sink ^= h.HashTuple(&v4) ^ h.HashTuple(&v6) }); n != 0 {
		t.Errorf("HashTuple: %v allocs", n)
	}
	_ = sink
}

func BenchmarkToeplitzIPv4(b *testing.B) {
	h, _ := NewHasher(MicrosoftKey)
	tup, _ := NewTuple(ProtoUDP, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), 1234, 5678)
	b.ReportAllocs()
	var sink uint32
	for i := 0; b.Loop(); i++ {
		tup.SrcPort = uint16(i)
		sink ^= h.HashTuple(&tup)
	}
	_ = sink
}

func BenchmarkToeplitzIPv6(b *testing.B) {
	h, _ := NewHasher(MicrosoftKey)
	tup, _ := NewTuple(ProtoUDP, netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), 1234, 5678)
	b.ReportAllocs()
	var sink uint32
	for i := 0; b.Loop(); i++ {
		tup.SrcPort = uint16(i)
		sink ^= h.HashTuple(&tup)
	}
	_ = sink
}

func BenchmarkToeplitzRefIPv4(b *testing.B) {
	in := make([]byte, 12)
	b.ReportAllocs()
	var sink uint32
	for i := 0; b.Loop(); i++ {
		in[11] = byte(i)
		sink ^= ToeplitzRef(MicrosoftKey, in)
	}
	_ = sink
}
