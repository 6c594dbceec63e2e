package auth

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

// plain runs the PLAIN conversation: one saslStart whose payload is
// "\x00username\x00password" (no authorization identity), which the server
// must answer with done:true.
func (a *Authenticator) plain(ctx context.Context, conn wire.RoundTripper) error {
	reply, err := a.roundTrip(ctx, conn, PLAIN, "saslStart", bson.D{
		{Key: "saslStart", Value: int32(1)},
		{Key: "mechanism", Value: PLAIN},
		{Key: "payload", Value: bson.Binary{Subtype: 0, Data: plainPayload(a.username, a.keys().password)}},
	}, a.source)
	if err != nil {
		return err
	}
	r, err := parseSASLReply(PLAIN, reply)
	if err != nil {
		return err
	}
	if !r.done {
		return authErr(PLAIN, "authentication failed: the server did not end the PLAIN conversation after its only step")
	}
	return nil
}

// plainPayload is the PLAIN message: "\x00username\x00password".
func plainPayload(username, password string) []byte {
	payload := make([]byte, 0, 2+len(username)+len(password))
	payload = append(payload, 0)
	payload = append(payload, username...)
	payload = append(payload, 0)
	return append(payload, password...)
}

// x509Command is the authenticate command, without "$db". The username goes
// in only when the user gave one.
func (a *Authenticator) x509Command() bson.D {
	d := bson.D{
		{Key: "authenticate", Value: int32(1)},
		{Key: "mechanism", Value: X509},
	}
	if a.username != "" {
		d = append(d, bson.E{Key: "user", Value: a.username})
	}
	return d
}

// x509 runs the MONGODB-X509 authenticate command on $external.
func (a *Authenticator) x509(ctx context.Context, conn wire.RoundTripper) error {
	_, err := a.roundTrip(ctx, conn, X509, "authenticate", a.x509Command(), "$external")
	return err
}
