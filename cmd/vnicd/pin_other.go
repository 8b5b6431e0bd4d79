//go:build !linux

package main

func pinThread(int) {}
