// Package cpuacct places a run on CPUs and accounts for the CPU time it
// used, for experiments that compare transports on the same CPUs.
//
// A comparison gives every transport the same host CPUs: the hosts and the
// load client share the host set (Placement.Host) and the emulated NIC,
// when there is one, runs on the NIC set (Placement.NIC). PinSelf narrows
// every thread of this process to a CPU set (threads created later inherit
// it); StartPinned starts a child process on a CPU set (taskset
// semantics).
//
// Around a run, Sample reads per-CPU busy time from /proc/stat and the CPU
// time of this process and of named NIC processes (by pid); Since turns two
// samples into a Usage: busy fraction per CPU, host CPU-seconds (this
// process), NIC CPU-seconds (the NIC processes), and per million updates or
// per GB. Usage.Idle is the verdict that a CPU (the NIC set during a kernel
// TCP run) was under a busy limit, so the run got no help from it.
//
// /proc/stat is system-wide: on a shared machine other work shows up in
// the busy figures too, which is why the verdict is reported, not assumed.
package cpuacct
