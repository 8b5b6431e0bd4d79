package ring

import (
	"fmt"
	"reflect"
	"sync/atomic"
	"unsafe"
)

// view is the typed view of a ring over its memory.
type view[T any] struct {
	prod  *uint64
	cons  *uint64
	slots []T
	mask  uint64
	shift uint // log2(capacity)
}

// newView checks mem and lays a typed view over it. T must be a fixed-size
// type without pointers (the memory may be shared with another process).
func newView[T any](mem []byte, capacity int) (view[T], error) {
	var zero T
	var v view[T]
	if err := checkCapacity(capacity); err != nil {
		return v, err
	}
	if err := plainType(reflect.TypeOf(zero)); err != nil {
		return v, err
	}
	esz := int(unsafe.Sizeof(zero))
	if esz == 0 {
		return v, fmt.Errorf("%w: zero-size entry type", ErrGeometry)
	}
	need := Size(capacity, esz)
	if len(mem) < need {
		return v, fmt.Errorf("%w: ring of %d x %d-byte entries needs %d bytes, got %d", ErrGeometry, capacity, esz, need, len(mem))
	}
	base := unsafe.Pointer(unsafe.SliceData(mem))
	if uintptr(base)%8 != 0 {
		return v, fmt.Errorf("%w: ring memory is not 8-byte aligned", ErrGeometry)
	}
	if uintptr(HeaderSize)%unsafe.Alignof(zero) != 0 {
		return v, fmt.Errorf("%w: entry alignment %d does not divide header size", ErrGeometry, unsafe.Alignof(zero))
	}
	v.prod = (*uint64)(unsafe.Add(base, ProdOffset))
	v.cons = (*uint64)(unsafe.Add(base, ConsOffset))
	v.slots = unsafe.Slice((*T)(unsafe.Add(base, HeaderSize)), capacity)
	v.mask = uint64(capacity - 1)
	for 1<<v.shift < capacity {
		v.shift++
	}
	return v, nil
}

// plainType refuses types that hold pointers: such values in shared memory
// would be meaningless to the other process and invisible to the GC.
func plainType(t reflect.Type) error {
	switch t.Kind() {
	case reflect.Bool, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return nil
	case reflect.Array:
		return plainType(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if err := plainType(t.Field(i).Type); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%w: entry type %s holds %s; use fixed-size integers only", ErrGeometry, t, t.Kind())
}

// EntrySize returns the size of one entry of a [Producer]/[Consumer] ring of T.
func EntrySize[T any]() int {
	var zero T
	return int(unsafe.Sizeof(zero))
}

// GenEntrySize returns the size of one slot of a [GenProducer]/[GenConsumer]
// ring of T: the 32-bit control word followed by T (padded to T's alignment).
func GenEntrySize[T any]() int {
	var zero genSlot[T]
	return int(unsafe.Sizeof(zero))
}

// Cursors loads both shared cursors of the ring in mem, for observers such
// as vnicctl and for a side that attaches late. The values are untrusted and
// may be mid-update. ok is false when mem is too short or misaligned.
func Cursors(mem []byte) (prod, cons uint64, ok bool) {
	if len(mem) < HeaderSize {
		return 0, 0, false
	}
	base := unsafe.Pointer(unsafe.SliceData(mem))
	if uintptr(base)%8 != 0 {
		return 0, 0, false
	}
	return atomic.LoadUint64((*uint64)(unsafe.Add(base, ProdOffset))),
		atomic.LoadUint64((*uint64)(unsafe.Add(base, ConsOffset))), true
}
