package bpf_test

import (
	"log"

	"github.com/vnic/vnic/bpf"
)

// Load the program, claim only UDP port 4791 (everything else, and
// ARP, stays with the kernel), attach natively if possible, and log the
// mode obtained.
func ExampleLoad() {
	objs, err := bpf.Load(bpf.Options{Queues: 8, Config: bpf.Config{Claims: []bpf.Claim{{Proto: 17, PortLo: 4791, PortHi: 4791}}}})
	if err != nil {
		log.Fatal(err)
	}
	defer objs.Close()
	const ifindex = 2 // from net.InterfaceByName
	l, mode, err := objs.Attach(ifindex, bpf.ModeAuto)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	log.Printf("XDP attached in %v mode", mode)
	// Then open xsk sockets with Map: objs, so each queue redirects to its socket.
}
