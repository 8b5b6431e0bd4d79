//go:build amd64 && !race

#include "textflag.h"

// func copyNT(dst, src *byte, n int)
// n is a multiple of 16 and dst is 16-byte aligned; src may be unaligned.
TEXT ·copyNT(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
	MOVQ	CX, DX
	SHRQ	$6, CX
	JZ	tail
loop64:
	MOVOU	0(SI), X0
	MOVOU	16(SI), X1
	MOVOU	32(SI), X2
	MOVOU	48(SI), X3
	MOVNTO	X0, 0(DI)
	MOVNTO	X1, 16(DI)
	MOVNTO	X2, 32(DI)
	MOVNTO	X3, 48(DI)
	ADDQ	$64, SI
	ADDQ	$64, DI
	DECQ	CX
	JNZ	loop64
tail:
	ANDQ	$63, DX
	SHRQ	$4, DX
	JZ	done
loop16:
	MOVOU	(SI), X0
	MOVNTO	X0, (DI)
	ADDQ	$16, SI
	ADDQ	$16, DI
	DECQ	DX
	JNZ	loop16
done:
	RET

// func sfence()
TEXT ·sfence(SB), NOSPLIT, $0-0
	SFENCE
	RET
