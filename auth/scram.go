package auth

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/xdg-go/scram"
	"github.com/xdg-go/stringprep"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

// maxSASLSteps bounds the number of replies a SASL conversation reads. A
// SCRAM conversation needs two, three with servers that ignore
// skipEmptyExchange.
const maxSASLSteps = 10

// maxIterations bounds the SCRAM iteration count a server may ask for, so
// that a hostile server cannot make the key derivation run for minutes.
// Servers default to 10000 (SHA-1) and 15000 (SHA-256); the minimum is 4096.
const maxIterations = 10_000_000

// scramClient returns the mechanism's client, made on first use and then
// kept with its cache of derived keys. SCRAM-SHA-1 uses the MongoDB password
// digest and no SASLprep; SCRAM-SHA-256 SASLpreps the password. Neither
// SASLpreps the username.
func (a *Authenticator) scramClient(mech string) (*scram.Client, error) {
	k := a.keys()
	k.mu.Lock()
	defer k.mu.Unlock()
	if c := k.clients[mech]; c != nil {
		return c, nil
	}
	var (
		c   *scram.Client
		err error
	)
	switch mech {
	case SCRAMSHA1:
		c, err = scram.SHA1.NewClientUnprepped(a.username, mongoPasswordDigest(a.username, k.password), "")
	default:
		var prepped string
		if prepped, err = saslPrep(k.password); err != nil {
			return nil, err
		}
		c, err = scram.SHA256.NewClientUnprepped(a.username, prepped, "")
	}
	if err != nil {
		return nil, authErr(mech, "%v", err)
	}
	c = c.WithMinIterations(4096)
	if a.nonceGen != nil {
		c = c.WithNonceGenerator(a.nonceGen)
	}
	if k.clients == nil {
		k.clients = map[string]*scram.Client{}
	}
	k.clients[mech] = c
	return c, nil
}

// saslPrep prepares a SCRAM-SHA-256 password. Its error does not show the
// password.
func saslPrep(password string) (string, error) {
	prepped, err := stringprep.SASLprep.Prepare(password)
	if err == nil {
		return prepped, nil
	}
	var perr stringprep.Error
	if errors.As(err, &perr) {
		return "", authErr(SCRAMSHA256, "the password cannot be prepared with SASLprep: %s", perr.Msg)
	}
	return "", authErr(SCRAMSHA256, "the password cannot be prepared with SASLprep")
}

// mongoPasswordDigest is HEX(MD5(username + ":mongo:" + password)), the
// password SCRAM-SHA-1 uses.
func mongoPasswordDigest(username, password string) string {
	sum := md5.Sum([]byte(username + ":mongo:" + password))
	return hex.EncodeToString(sum[:])
}

// scramConv is one SCRAM conversation.
type scramConv struct {
	a    *Authenticator
	mech string
	conv *scram.ClientConversation
}

func (a *Authenticator) newSCRAM(mech string) (*scramConv, error) {
	c, err := a.scramClient(mech)
	if err != nil {
		return nil, err
	}
	return &scramConv{a: a, mech: mech, conv: c.NewConversation()}, nil
}

// start returns the saslStart command, without "$db".
func (c *scramConv) start() (bson.D, error) {
	first, err := c.conv.Step("")
	if err != nil {
		return nil, authErr(c.mech, "%v", err)
	}
	return bson.D{
		{Key: "saslStart", Value: int32(1)},
		{Key: "mechanism", Value: c.mech},
		{Key: "payload", Value: bson.Binary{Subtype: 0, Data: []byte(first)}},
		{Key: "options", Value: bson.D{{Key: "skipEmptyExchange", Value: true}}},
	}, nil
}

// run is the whole conversation: saslStart, then finish.
func (c *scramConv) run(ctx context.Context, conn wire.RoundTripper) error {
	start, err := c.start()
	if err != nil {
		return err
	}
	reply, err := c.a.roundTrip(ctx, conn, c.mech, "saslStart", start, c.a.source)
	if err != nil {
		return err
	}
	r, err := parseSASLReply(c.mech, reply)
	if err != nil {
		return err
	}
	return c.finish(ctx, conn, r)
}

// finish goes on from the reply to saslStart (or to its speculative form)
// with saslContinue until the server proved it knows the password and said
// it is done, in at most maxSASLSteps replies.
func (c *scramConv) finish(ctx context.Context, conn wire.RoundTripper, r saslReply) error {
	id := r.conversationID
	for step := 1; ; step++ {
		var payload []byte
		if !c.conv.Done() {
			msg, err := c.step(ctx, r.payload)
			if err != nil {
				return err
			}
			if c.conv.Done() {
				// The server's signature checked out. A server that
				// honours skipEmptyExchange is done; an older one wants
				// an empty message.
				if r.done {
					return nil
				}
			} else {
				if r.done {
					return authErr(c.mech, "authentication failed: the server ended the conversation before proving it knows the password")
				}
				payload = []byte(msg)
			}
		} else if r.done {
			return nil
		}
		if step >= maxSASLSteps {
			return authErr(c.mech, "authentication failed: the server did not finish the conversation in %d steps", maxSASLSteps)
		}
		if err := ctx.Err(); err != nil {
			return &Error{Mechanism: c.mech, Err: err}
		}
		reply, err := c.a.roundTrip(ctx, conn, c.mech, "saslContinue", bson.D{
			{Key: "saslContinue", Value: int32(1)},
			{Key: "conversationId", Value: id},
			{Key: "payload", Value: bson.Binary{Subtype: 0, Data: payload}},
		}, c.a.source)
		if err != nil {
			return err
		}
		if r, err = parseSASLReply(c.mech, reply); err != nil {
			return err
		}
	}
}

// step feeds a server message to the client conversation. The step that
// derives the keys from the password can take a while (the server chooses the
// iteration count); step returns when ctx ends, leaving that work to finish
// in the background.
func (c *scramConv) step(ctx context.Context, challenge []byte) (string, error) {
	if n, ok := iterationCount(challenge); ok && n > maxIterations {
		return "", authErr(c.mech, "authentication failed: the server asks for %d iterations, more than the %d mongopool allows", n, maxIterations)
	}
	type result struct {
		msg string
		err error
	}
	done := make(chan result, 1)
	go func() {
		msg, err := c.conv.Step(string(challenge))
		done <- result{msg, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			// The SCRAM library quotes the server's messages.
			return "", &Error{Mechanism: c.mech, Err: fmt.Errorf("authentication failed: %w", c.a.keys().scrub.error(r.err))}
		}
		return r.msg, nil
	case <-ctx.Done():
		return "", &Error{Mechanism: c.mech, Err: ctx.Err()}
	}
}

// iterationCount finds the "i=" attribute of a server-first message.
func iterationCount(msg []byte) (int, bool) {
	for _, attr := range strings.Split(string(msg), ",") {
		if v, ok := strings.CutPrefix(attr, "i="); ok {
			n, err := strconv.Atoi(v)
			return n, err == nil
		}
	}
	return 0, false
}
