//go:build !linux

package main

import "time"

// nap sleeps d (time.Sleep: the portable fallback).
func nap(d time.Duration) { time.Sleep(d) }
