// Package browsertest tests the dashboard's page in a real browser: headless
// Chromium, driven through the DevTools protocol, against a dashboard served
// on 127.0.0.1 for a pool of the in-process test server, and the dashboard
// of the proxy's daemon (cmd/mongopool-proxy, built by the test and run in
// front of its in-process test replica set) on its admin listener.
//
// It lives in a module of its own so that neither the library nor the
// dashboard depends on the browser's driver. The tests need Debian's
// chromium on PATH; without it they are skipped, unless CI=true, where they
// fail, as CI installs it.
package browsertest
