package bichannel

import (
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
// side's proof is never the other's. A says nothing but its id before D's
// proof checked out; D says nothing about itself but its id before A's did.
// Both then derive the connection's datagram keys (an HKDF-style
// extract-and-expand with HMAC-SHA256 over the same transcript), one per
// direction.

// transcript is what both proofs and the keys are computed over.
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
	labelAcceptor = "bichannel v2 acceptor proof"
	labelDialer   = "bichannel v2 dialer proof"
	labelExtract  = "bichannel v2 keys"
	labelDToA     = "dialer to acceptor datagrams"
	labelAToD     = "acceptor to dialer datagrams"
)

// proof is one side's HMAC over the transcript.
func proof(key []byte, label string, tr []byte) [macLen]byte {
	return hmacSum(key, []byte(label), tr)
}

// proofOK compares a received proof with the expected one in constant
// time.
func proofOK(key []byte, label string, tr []byte, got *[macLen]byte) bool {
	want := proof(key, label, tr)
	return hmac.Equal(want[:], got[:])
}

// datagramKeys derives the connection's two SipHash keys: the one the
// dialer tags its datagrams with, and the acceptor's.
func datagramKeys(key, tr []byte) (dToA, aToD sipKey) {
	prk := hmacSum(key, []byte(labelExtract), tr)
	k1 := hmacSum(prk[:], []byte(labelDToA), []byte{1})
	k2 := hmacSum(prk[:], []byte(labelAToD), []byte{1})
	return newSipKey(k1[:16]), newSipKey(k2[:16])
}
