package mongopool

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/mongopool/mongopool/connstring"
)

// tlsConfig builds the TLS configuration the connection string asks for, or
// nil when it asks for none.
func tlsConfig(cs *connstring.ConnString, host string) (*tls.Config, error) {
	if !cs.TLSEnabled() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
	if cs.TLSCAFile != "" {
		pemData, err := os.ReadFile(cs.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("tlsCAFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("tlsCAFile %s: no PEM certificate in it", cs.TLSCAFile)
		}
		cfg.RootCAs = pool
	}
	if cs.TLSCertificateKeyFile != "" {
		cert, err := loadKeyPair(cs.TLSCertificateKeyFile, cs.TLSCertificateKeyFilePassword)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	insecure := isTrue(cs.TLSInsecure)
	switch {
	case insecure || isTrue(cs.TLSAllowInvalidCertificates):
		cfg.InsecureSkipVerify = true
	case isTrue(cs.TLSAllowInvalidHostnames):
		// Verify the chain but not the name: Go has no switch for that, so
		// skip the built-in verification and do the chain part ourselves.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(st tls.ConnectionState) error {
			if len(st.PeerCertificates) == 0 {
				return errors.New("tls: the server sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: cfg.RootCAs, Intermediates: x509.NewCertPool()}
			for _, c := range st.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := st.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	return cfg, nil
}

// loadKeyPair reads tlsCertificateKeyFile: the client certificate and its
// private key in one PEM file, the key possibly encrypted with the legacy PEM
// encryption that tlsCertificateKeyFilePassword opens.
func loadKeyPair(file, password string) (tls.Certificate, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsCertificateKeyFile: %w", err)
	}
	var certPEM, keyPEM []byte
	decrypted := false
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		switch {
		case block.Type == "CERTIFICATE":
			certPEM = append(certPEM, pem.EncodeToMemory(block)...)
		case x509.IsEncryptedPEMBlock(block): //nolint:staticcheck // the legacy format is what the option exists for
			if password == "" {
				return tls.Certificate{}, fmt.Errorf("tlsCertificateKeyFile %s: the key is encrypted and tlsCertificateKeyFilePassword is not set", file)
			}
			der, err := x509.DecryptPEMBlock(block, []byte(password)) //nolint:staticcheck
			if err != nil {
				return tls.Certificate{}, fmt.Errorf("tlsCertificateKeyFile %s: decrypting the key: wrong tlsCertificateKeyFilePassword?", file)
			}
			keyPEM = pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: der})
			decrypted = true
		default:
			keyPEM = pem.EncodeToMemory(block)
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil && decrypted {
		// The legacy encryption cannot always tell a wrong password: about
		// one in 256 decrypts to bytes with valid padding, which then do not
		// parse.
		return tls.Certificate{}, fmt.Errorf("tlsCertificateKeyFile %s: the decrypted key does not parse (%v): wrong tlsCertificateKeyFilePassword?", file, err)
	}
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsCertificateKeyFile %s: %w", file, err)
	}
	return cert, nil
}

func isTrue(b *bool) bool { return b != nil && *b }
