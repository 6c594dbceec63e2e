//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package main

// soReusePort is SO_REUSEPORT on the BSDs and macOS.
const soReusePort = 0x200
