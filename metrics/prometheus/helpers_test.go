package prommetrics_test

import "github.com/mongopool/mongopool/internal/pooltest"

// hangLimit bounds every wait of the tests, so that a regression that leaves
// one waiting fails in seconds with a message: the bound of the shared pool
// helpers.
const hangLimit = pooltest.HangLimit
