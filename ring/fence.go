package ring

import "sync/atomic"

var fenceWord uint32

// Fence is a full memory barrier: every store before it (including one
// made by a GenProducer's Post, a release store only) is visible to other
// cores before any load after it. A producer that posts and then reads a
// word the consumer stores before looking at the ring (a need-wakeup flag:
// the Dekker pattern) calls it in between. It is a locked read-modify-write
// on a word of its own (LOCK XADD on amd64); only one goroutine should
// call it often.
func Fence() { atomic.AddUint32(&fenceWord, 0) }
