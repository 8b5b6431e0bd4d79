// Package ntcopy writes a frame into a buffer that another CPU reads next
// with non-temporal stores, which do not fetch the destination's lines
// first.
//
// A client's TX buffer was last read by vnicd's engine on its own CPU. An
// ordinary copy into it must own each line before it writes it: a
// read-for-ownership that crosses CPUs and waits for the other CPU's copy
// to be invalidated, paid line by line as the store buffer drains. A
// non-temporal store writes whole lines around the cache instead, so a
// large frame costs the sender its loads and a fence, not a round trip per
// line. The engine then reads the frame from memory, which it did across
// CPUs anyway.
//
// Non-temporal stores are weakly ordered: a writer must call Fence after
// its frames and before it publishes them (a ring cursor stored with
// release semantics does not order them). Off amd64, and under the race
// detector (so that it sees the writes), Frame reports false and the caller
// copies as usual.
package ntcopy
