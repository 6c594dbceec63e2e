// Package integration holds the tests of mongopool's real connection stack
// against FerretDB, a MongoDB-wire server that nobody here wrote, embedded in
// the test process. It lives in the demo's module so that the library's module
// never depends on FerretDB.
package integration
