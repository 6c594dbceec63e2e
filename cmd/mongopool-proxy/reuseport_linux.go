package main

// soReusePort is SO_REUSEPORT on Linux.
const soReusePort = 0xf
