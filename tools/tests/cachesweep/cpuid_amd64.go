package main

func cpuid(leaf, sub uint32) (a, b, c, d uint32)

const haveCPUID = true
