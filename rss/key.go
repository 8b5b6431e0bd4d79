package rss

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
)

const (
	// KeyLen is the length of a standard RSS key in bytes: enough for the
	// longest hash input (MaxInputLen) plus the 4 bytes of the 32-bit window.
	KeyLen = 40
	// MaxKeyLen bounds the key length NewHasher accepts, which bounds the
	// size of its lookup tables (1 KiB per key byte).
	MaxKeyLen = 256
	// MaxInputLen is the longest hash input this package builds: IPv6 source
	// and destination addresses plus two ports.
	MaxInputLen = 36
)

// Key is a Toeplitz secret key. Its length must be between KeyLen and
// MaxKeyLen bytes.
type Key []byte

// MicrosoftKey is the 40-byte key from Microsoft's RSS verification suite. It
// is the default key of many NIC drivers and of this project. Treat it as
// read-only; use SymmetricKey or RandomKey for a key you may modify.
var MicrosoftKey = Key{
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2,
	0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
	0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4,
	0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
	0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
}

// SymmetricKey returns a new 40-byte key made of 0x6d5a repeated. Because the
// key repeats every 16 bits and addresses and ports are multiples of 16 bits
// long, swapping source and destination (addresses and ports together) gives
// the same hash, so both directions of a flow land on the same queue
// (Woo and Park, "Scalable TCP Session Monitoring with Symmetric Receive-side
// Scaling").
func SymmetricKey() Key {
	k := make(Key, KeyLen)
	for i := 0; i < KeyLen; i += 2 {
		k[i], k[i+1] = 0x6d, 0x5a
	}
	return k
}

// RandomKey returns a new 40-byte key read from r, or from crypto/rand when r
// is nil.
func RandomKey(r io.Reader) (Key, error) {
	if r == nil {
		r = rand.Reader
	}
	k := make(Key, KeyLen)
	if _, err := io.ReadFull(r, k); err != nil {
		return nil, fmt.Errorf("random key: %w", err)
	}
	return k, nil
}

// ParseKey parses a key given by name or in hex. The names are "microsoft" (or
// "default") for MicrosoftKey, "symmetric" for SymmetricKey and "random" for a
// key from crypto/rand. Hex may have a "0x" prefix and ':' separators between
// bytes, as ethtool prints keys (6d:5a:56:...).
func ParseKey(s string) (Key, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "microsoft", "default":
		return append(Key(nil), MicrosoftKey...), nil
	case "symmetric":
		return SymmetricKey(), nil
	case "random":
		return RandomKey(nil)
	case "":
		return nil, fmt.Errorf("parse key: empty key: give microsoft, symmetric, random or %d hex bytes", KeyLen)
	}
	h := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	h = strings.ReplaceAll(h, ":", "")
	b, err := hex.DecodeString(h)
	if err != nil {
		return nil, fmt.Errorf("parse key %q: not a key name or hex bytes: give microsoft, symmetric, random or %d hex bytes (ethtool style 6d:5a:56:da or plain hex)", s, KeyLen)
	}
	k := Key(b)
	if err := k.Validate(); err != nil {
		return nil, fmt.Errorf("parse key: %w", err)
	}
	return k, nil
}

// Validate reports whether k has a usable length.
func (k Key) Validate() error {
	switch {
	case len(k) < KeyLen:
		return fmt.Errorf("key is %d bytes, need at least %d: use a %d-byte key such as rss.MicrosoftKey", len(k), KeyLen, KeyLen)
	case len(k) > MaxKeyLen:
		return fmt.Errorf("key is %d bytes, at most %d are supported: use a %d-byte key", len(k), MaxKeyLen, KeyLen)
	}
	return nil
}

// String formats k the way ethtool -x prints it: hex bytes separated by ':'.
func (k Key) String() string {
	const digits = "0123456789abcdef"
	b := make([]byte, 0, len(k)*3)
	for i, v := range k {
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, digits[v>>4], digits[v&0xf])
	}
	return string(b)
}
