package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// tlsSetup is the server's TLS configuration and the files a client needs.
type tlsSetup struct {
	config *tls.Config
	// caFile is the CA that clients trust, given in the connection string
	// as tlsCAFile; "" when -tls-cert came without -tls-ca.
	caFile string
	// dir is where the generated files are, "" for given ones; removeDir
	// says it is a temporary directory, removed at exit.
	dir       string
	removeDir bool
	// clientFile is a client certificate and its key, signed by the CA
	// (generated only), for tests of tlsCertificateKeyFile.
	clientFile string
}

// The files of a generated setup, in -tls-dir.
const (
	caFileName     = "ca.pem"
	serverFileName = "server.pem" // certificate and key, as mongod's --tlsCertificateKeyFile
	clientFileName = "client.pem" // certificate and key, as a driver's tlsCertificateKeyFile
)

// certValidity is how long generated certificates are valid: long enough
// for any test run, short enough that a stray file is soon of no use.
const certValidity = 30 * 24 * time.Hour

// setupTLS returns the TLS setup of o: generated into o.tlsDir (or a new
// temporary directory), or loaded from o.tlsCert, o.tlsKey and o.tlsCA.
func setupTLS(o *settings) (*tlsSetup, error) {
	if o.tlsCert != "" {
		return loadTLS(o.tlsCert, o.tlsKey, o.tlsCA)
	}
	dir, remove := o.tlsDir, false
	if dir == "" {
		d, err := os.MkdirTemp("", "mongotest-tls-")
		if err != nil {
			return nil, fmt.Errorf("-tls: %w", err)
		}
		dir, remove = d, true
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("-tls-dir: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		dir = abs
	}
	s, err := generateTLS(dir)
	if err != nil {
		if remove {
			os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("-tls: %w", err)
	}
	s.removeDir = remove
	return s, nil
}

// loadTLS loads a given certificate, key and, if not "", CA.
func loadTLS(certFile, keyFile, caFile string) (*tlsSetup, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("-tls-cert, -tls-key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	s := &tlsSetup{config: cfg}
	if caFile != "" {
		pemData, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("-tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("-tls-ca %s: no PEM certificate in the file", caFile)
		}
		// A client certificate is verified when given, so that
		// MONGODB-X509 tests can use one; none is required.
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
		if s.caFile, err = filepath.Abs(caFile); err != nil {
			return nil, fmt.Errorf("-tls-ca: %w", err)
		}
	}
	return s, nil
}

// generateTLS makes a CA, a server certificate for 127.0.0.1, ::1 and
// localhost, and a client certificate, and writes them into dir.
func generateTLS(dir string) (*tlsSetup, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caSerial, err := serial()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          caSerial,
		Subject:               pkix.Name{CommonName: "mongotest CA", Organization: []string{"mongotest"}},
		NotBefore:             now.Add(-time.Hour), // a clock a little behind still takes it
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	leaf := func(cn string, usage x509.ExtKeyUsage, server bool) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		sn, err := serial()
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: sn,
			Subject:      pkix.Name{CommonName: cn, Organization: []string{"mongotest"}},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(certValidity),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if server {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
	}
	serverCert, serverKey, err := leaf("mongotest server", x509.ExtKeyUsageServerAuth, true)
	if err != nil {
		return nil, err
	}
	clientCert, clientKey, err := leaf("mongotest client", x509.ExtKeyUsageClientAuth, false)
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})

	s := &tlsSetup{
		dir:        dir,
		caFile:     filepath.Join(dir, caFileName),
		clientFile: filepath.Join(dir, clientFileName),
	}
	files := []struct {
		path string
		data []byte
	}{
		{s.caFile, caPEM},
		{filepath.Join(dir, serverFileName), append(serverCert, serverKey...)},
		{s.clientFile, append(clientCert, clientKey...)},
	}
	for _, f := range files {
		if err := writeFileAtomic(f.path, f.data); err != nil {
			return nil, err
		}
	}

	cert, err := tls.X509KeyPair(serverCert, serverKey)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	s.config = &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		// client.pem is verified when a client presents it; none is
		// required, as mongod's --tlsAllowConnectionsWithoutCertificates.
		ClientCAs:  pool,
		ClientAuth: tls.VerifyClientCertIfGiven,
	}
	return s, nil
}

// serial returns a random certificate serial number of 127 bits.
func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// remove removes the temporary directory of generated files.
func (s *tlsSetup) remove() error {
	if s == nil || !s.removeDir {
		return nil
	}
	return os.RemoveAll(s.dir)
}
