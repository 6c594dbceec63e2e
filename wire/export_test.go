package wire

// DecompressStep is DecompressContext inflating in steps of step bytes, so
// that tests reach the stepwise paths with small messages.
var DecompressStep = decompress
