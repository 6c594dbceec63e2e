// Package cmapspec runs the JSON test files of the CMAP specification
// (testdata/spec/cmap-format; the README.md there defines the format and the
// MATCH function) against a *pool.Pool. It is test support: only tests
// import it.
//
// The same runner serves both styles of file. The pool package runs the
// "unit" files with a fake connector inside testing/synctest bubbles, where
// waits and timeouts cost nothing; the root package runs the "integration"
// files with the real connector against a mongotest server in real time,
// with the file's failpoint set on the server. What differs is given by a
// [Runner]: how to make the pool, and whether to use a bubble.
package cmapspec
