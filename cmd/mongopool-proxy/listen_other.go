//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

import (
	"context"
	"errors"
	"net"
)

func listen(ctx context.Context, addr string, reusePort bool) (net.Listener, error) {
	if reusePort {
		return nil, errors.New("-reuse-port: SO_REUSEPORT is not available on this system")
	}
	return (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
}
