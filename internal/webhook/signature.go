package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
)

// SignatureHeader carries GitHub's HMAC-SHA256 of the body, keyed with the
// webhook secret: "sha256=" followed by 64 hex digits.
const SignatureHeader = "X-Hub-Signature-256"

// ErrSignature is returned by VerifySignature for a missing, malformed or
// wrong signature; the service answers 401 and reads nothing of the body.
var ErrSignature = errors.New("webhook signature missing or invalid")

// VerifySignature checks header (the X-Hub-Signature-256 value) against the
// HMAC-SHA256 of body keyed with secret, in constant time (hmac.Equal), so
// a forger learns nothing from how long a wrong guess took. An empty secret
// never verifies.
//
// GitHub docs: https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
func VerifySignature(secret, body []byte, header string) error {
	if len(secret) == 0 {
		return ErrSignature
	}
	hexSum, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return ErrSignature
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil || len(got) != sha256.Size {
		return ErrSignature
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return ErrSignature
	}
	return nil
}
