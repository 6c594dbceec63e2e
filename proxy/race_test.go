//go:build race

package proxy_test

func init() { raceBuild = true }
