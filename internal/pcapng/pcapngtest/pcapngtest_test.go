package pcapngtest

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// TestReadBigEndian: a section in big-endian order (as written on another
// machine) reads the same.
func TestReadBigEndian(t *testing.T) {
	be := func(v ...any) []byte {
		var b bytes.Buffer
		for _, x := range v {
			binary.Write(&b, binary.BigEndian, x)
		}
		return b.Bytes()
	}
	data := []byte{1, 2, 3, 4, 5}
	var f bytes.Buffer
	f.Write(be(uint32(blockSHB), uint32(28), uint32(byteOrderMagic), uint16(1), uint16(0), int64(-1), uint32(28)))
	f.Write(be(uint32(blockIDB), uint32(20), uint16(1), uint16(0), uint32(0), uint32(20)))
	f.Write(be(uint32(blockEPB), uint32(40), uint32(0), uint32(0), uint32(1500000), uint32(5), uint32(60)))
	f.Write(append(data, 0, 0, 0))
	f.Write(be(uint32(40)))
	got, err := Read(&f)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Packets) != 1 || !bytes.Equal(got.Packets[0].Data, data) || got.Packets[0].OrigLen != 60 ||
		!got.Packets[0].Time.Equal(time.Unix(1, 500000000)) { // default resolution: microseconds
		t.Fatalf("read %+v", got.Packets)
	}
}
