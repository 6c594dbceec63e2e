// Command ferretserver runs the embedded FerretDB (on SQLite) as a process
// that proxybench can use as its server (-server-bin): it prints the
// server's connection string on its first line and, with -exit-on-eof, exits
// when its standard input ends, as cmd/mongotest does.
//
//	ferretserver [-exit-on-eof]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/mongopool/mongopool/internal/embedded"
)

func main() {
	exitOnEOF := flag.Bool("exit-on-eof", false, "exit when the standard input ends")
	flag.Parse()
	s, err := embedded.Start(embedded.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ferretserver:", err)
		os.Exit(1)
	}
	defer s.Close()
	fmt.Println(s.URI())
	stop := make(chan struct{}, 2)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	go func() { <-sig; stop <- struct{}{} }()
	if *exitOnEOF {
		go func() { io.Copy(io.Discard, os.Stdin); stop <- struct{}{} }()
	}
	<-stop
}
