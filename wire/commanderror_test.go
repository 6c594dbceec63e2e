package wire_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

func TestCheckReplyOK(t *testing.T) {
	for _, ok := range []any{1.0, int32(1), int64(1), true} {
		if err := wire.CheckReply(doc(t, bson.D{{Key: "n", Value: 3}, {Key: "ok", Value: ok}})); err != nil {
			t.Errorf("ok: %T(%v): %v", ok, ok, err)
		}
	}
	// ok:1 with a writeConcernError is not CheckReply's concern.
	wce := doc(t, bson.D{{Key: "ok", Value: 1.0}, {Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 64}}}})
	if err := wire.CheckReply(wce); err != nil {
		t.Errorf("writeConcernError: %v", err)
	}
}

func TestCheckReplyFailure(t *testing.T) {
	for _, ok := range []any{0.0, int32(0), int64(0), false, 0.5, int32(2)} {
		reply := doc(t, bson.D{
			{Key: "ok", Value: ok},
			{Key: "errmsg", Value: "Authentication failed."},
			{Key: "code", Value: int32(18)},
			{Key: "codeName", Value: "AuthenticationFailed"},
			{Key: "errorLabels", Value: bson.A{"RetryableWriteError", "SystemOverloadedError"}},
		})
		err := wire.CheckReply(reply)
		var ce *wire.CommandError
		if !errors.As(err, &ce) {
			t.Fatalf("ok: %T(%v): got %v, want a *CommandError", ok, ok, err)
		}
		if ce.Code != 18 || ce.CodeName != "AuthenticationFailed" || ce.Message != "Authentication failed." ||
			!slices.Equal(ce.Labels, []string{"RetryableWriteError", "SystemOverloadedError"}) || string(ce.Raw) != string(reply) {
			t.Errorf("got %+v", ce)
		}
		if want := "server error: (AuthenticationFailed) Authentication failed. (code 18)"; err.Error() != want {
			t.Errorf("Error() = %q, want %q", err, want)
		}
		if errors.Is(err, wire.ErrProtocol) {
			t.Errorf("a server error is not a protocol error")
		}
	}
}

func TestCommandErrorFields(t *testing.T) {
	cases := []struct {
		reply bson.D
		want  wire.CommandError
		text  string
	}{
		{bson.D{{Key: "ok", Value: 0}}, wire.CommandError{}, "server error: command failed"},
		{bson.D{{Key: "ok", Value: 0}, {Key: "errmsg", Value: "boom"}}, wire.CommandError{Message: "boom"}, "server error: boom"},
		{bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: int64(91)}, {Key: "codeName", Value: "ShutdownInProgress"}}, wire.CommandError{Code: 91, CodeName: "ShutdownInProgress"}, "server error: (ShutdownInProgress) command failed (code 91)"},
		{bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: 11600.0}}, wire.CommandError{Code: 11600}, "server error: command failed (code 11600)"},
		// Fields of the wrong type are left out, not fatal.
		{bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: "x"}, {Key: "codeName", Value: 3}, {Key: "errmsg", Value: bson.D{}}, {Key: "errorLabels", Value: bson.A{1, "L"}}}, wire.CommandError{Labels: []string{"L"}}, "server error: command failed"},
		{bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: int64(1) << 40}, {Key: "errorLabels", Value: "notAnArray"}}, wire.CommandError{}, "server error: command failed"},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var ce *wire.CommandError
			if err := wire.CheckReply(doc(t, tc.reply)); !errors.As(err, &ce) {
				t.Fatalf("got %v", err)
			}
			if ce.Code != tc.want.Code || ce.CodeName != tc.want.CodeName || ce.Message != tc.want.Message || !slices.Equal(ce.Labels, tc.want.Labels) {
				t.Errorf("got %+v, want %+v", ce, tc.want)
			}
			if ce.Error() != tc.text {
				t.Errorf("Error() = %q, want %q", ce.Error(), tc.text)
			}
		})
	}
}

func TestCheckReplyProtocolErrors(t *testing.T) {
	cases := []struct {
		name  string
		reply bson.Raw
		want  string
	}{
		{"no ok", doc(t, bson.D{{Key: "n", Value: 1}}), `reply has no "ok" field`},
		{"empty", doc(t, bson.D{}), `no "ok"`},
		{"ok nested only", doc(t, bson.D{{Key: "sub", Value: bson.D{{Key: "ok", Value: 1}}}}), `no "ok"`},
		{"ok string", doc(t, bson.D{{Key: "ok", Value: "1"}}), `"ok" is a BSON string`},
		{"ok null", doc(t, bson.D{{Key: "ok", Value: nil}}), `"ok" is a BSON null`},
		{"nil", nil, "not a valid BSON document"},
		{"garbage", bson.Raw{0xff, 0, 0, 0, 1, 2}, "not a valid BSON document"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantProtoErr(t, wire.CheckReply(tc.reply), tc.want)
		})
	}
}

func TestHasErrorLabel(t *testing.T) {
	err := wire.CheckReply(doc(t, bson.D{{Key: "ok", Value: 0}, {Key: "errorLabels", Value: bson.A{"RetryableError"}}}))
	// The pool recognises errors by this method, through wrapping.
	var labeled interface{ HasErrorLabel(string) bool }
	if !errors.As(fmt.Errorf("wrapped: %w", err), &labeled) {
		t.Fatal("CommandError lacks HasErrorLabel(string) bool")
	}
	if !labeled.HasErrorLabel("RetryableError") || labeled.HasErrorLabel("SystemOverloadedError") || labeled.HasErrorLabel("") {
		t.Errorf("HasErrorLabel answers wrongly for %v", err)
	}
}
