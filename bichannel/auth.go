package bichannel

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
)

// The authenticated handshake (Config.ClusterKey set), dialer D, acceptor A:
//
//	D -> A  auth1: D's id, the id D dialed, nonce_D
//	A -> D  auth2: A's id, nonce_A, HMAC(K, "acceptor" | transcript)
//	D -> A  auth3: HMAC(K, "dialer" | transcript), then D's hello
//	A -> D  A's hello
//
// where K is the cluster key and the transcript is the protocol version,
// both ids and both nonces. Each proof covers the other side's fresh
// nonce, so neither can be replayed, and the two are labelled, so one
// side's proof is never the other's. The datagram keys are HKDF-SHA256 of
// the cluster key, with the transcript as salt and the direction as info.

func transcript(dialer, acceptor uint32, nd, na *[nonceLen]byte) []byte {
	b := make([]byte, 0, 2+8+2*nonceLen)
	b = binary.BigEndian.AppendUint16(b, helloVersion)
	b = binary.BigEndian.AppendUint32(b, dialer)
	b = binary.BigEndian.AppendUint32(b, acceptor)
	b = append(b, nd[:]...)
	return append(b, na[:]...)
}

func hmacSum(key []byte, parts ...[]byte) [macLen]byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	var out [macLen]byte
	m.Sum(out[:0])
	return out
}

const (
	labelAcceptor = "bichannel v3 acceptor proof"
	labelDialer   = "bichannel v3 dialer proof"
	labelDToA     = "bichannel v3 dialer to acceptor datagrams"
	labelAToD     = "bichannel v3 acceptor to dialer datagrams"
)

// proof is one side's HMAC over the transcript.
func proof(key []byte, label string, tr []byte) [macLen]byte {
	return hmacSum(key, []byte(label), tr)
}

// proofOK checks a received proof in constant time.
func proofOK(key []byte, label string, tr []byte, got *[macLen]byte) bool {
	want := proof(key, label, tr)
	return hmac.Equal(want[:], got[:])
}

// datagramKeys derives the connection's two SipHash keys: the one the
// dialer tags its datagrams with, and the acceptor's.
func datagramKeys(key, tr []byte) (dToA, aToD sipKey) {
	// hkdf.Key fails only for lengths beyond 255 hashes.
	k1, _ := hkdf.Key(sha256.New, key, tr, labelDToA, 16)
	k2, _ := hkdf.Key(sha256.New, key, tr, labelAToD, 16)
	return newSipKey(k1), newSipKey(k2)
}
