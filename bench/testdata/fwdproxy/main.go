// Command fwdproxy is the proxy benchmark's test peer: a TCP forwarder that
// copies bytes both ways between each client and a connection of its own
// to the upstream, nothing more.
//
//	fwdproxy -listen 127.0.0.1:PORT -upstream HOST:PORT
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "", "the address to listen on")
	upstream := flag.String("upstream", "", "the address to forward to")
	flag.Parse()
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("listening on", l.Addr())
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
		<-sig
		os.Exit(0)
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			// Out of file descriptors, say: the client waits in the
			// backlog until one is free.
			log.Print(err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go forward(c, *upstream)
	}
}

func forward(c net.Conn, upstream string) {
	defer c.Close()
	u, err := net.Dial("tcp", upstream)
	if err != nil {
		log.Print(err)
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(u, c); done <- struct{}{} }()
	go func() { io.Copy(c, u); done <- struct{}{} }()
	<-done
}
