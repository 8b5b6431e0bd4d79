#include "textflag.h"

// func prefetch(w *uintptr, nw int, r *uintptr, nr int)
// w[0:nw] with PREFETCHW (0F 0D /1: every AMD CPU, Intel since Broadwell
// (3DNowPrefetch); older CPUs execute the encoding as a NOP), r[0:nr]
// with PREFETCHT0. A prefetch never faults.
TEXT ·prefetch(SB), NOSPLIT, $0-32
	MOVQ	w+0(FP), SI
	MOVQ	nw+8(FP), CX
	TESTQ	CX, CX
	JLE	reads
loopw:
	MOVQ	(SI), AX
	BYTE	$0x0F; BYTE $0x0D; BYTE $0x08 // PREFETCHW (AX)
	ADDQ	$8, SI
	DECQ	CX
	JNZ	loopw
reads:
	MOVQ	r+16(FP), SI
	MOVQ	nr+24(FP), CX
	TESTQ	CX, CX
	JLE	done
loopr:
	MOVQ	(SI), AX
	PREFETCHT0	(AX)
	ADDQ	$8, SI
	DECQ	CX
	JNZ	loopr
done:
	RET
