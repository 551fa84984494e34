package ingress

import (
	"errors"
	"strings"

	"github.com/google/go-github/v62/github"
)

// SignatureHeader carries GitHub's HMAC-SHA256 of the body, keyed with the
// webhook secret: "sha256=" followed by 64 hex digits.
const SignatureHeader = github.SHA256SignatureHeader

// ErrSignature is returned by VerifySignature for a missing, malformed or
// wrong signature; the service answers 401 and reads nothing of the body.
var ErrSignature = errors.New("webhook signature missing or invalid")

// VerifySignature checks header (the X-Hub-Signature-256 value) against the
// HMAC-SHA256 of body keyed with secret. The MAC is computed and compared in
// constant time by go-github's ValidateSignature (hmac.Equal), so a forger
// learns nothing from how long a wrong guess took. Two guards stay here,
// because go-github allows what a webhook service must not: an empty secret
// never verifies (go-github would check an HMAC keyed with nothing, which
// anyone can compute), and only "sha256=" is accepted (go-github also takes
// "sha1=" and "sha512=", which would let a sender pick a weaker hash). The
// body is read by the caller, bounded, before this runs: go-github's
// ValidatePayload reads the request body without a limit, so it is not used.
//
// GitHub docs: https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
func VerifySignature(secret, body []byte, header string) error {
	if len(secret) == 0 || !strings.HasPrefix(header, "sha256=") {
		return ErrSignature
	}
	if err := github.ValidateSignature(header, body, secret); err != nil {
		return ErrSignature
	}
	return nil
}
