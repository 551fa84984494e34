package ingress

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func sign(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// sign512 and sign1 sign as go-github would also accept: the service only
// accepts sha256.
func sign512(secret, body string) string {
	m := hmac.New(sha512.New, []byte(secret))
	m.Write([]byte(body))
	return "sha512=" + hex.EncodeToString(m.Sum(nil))
}

func sign1(secret, body string) string {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(body))
	return "sha1=" + hex.EncodeToString(m.Sum(nil))
}

func TestVerifySignature(t *testing.T) {
	t.Parallel()
	body := `{"zen":"Keep it logically awesome."}`
	good := sign("s3cret", body)
	for _, tc := range []struct {
		name, secret, body, header string
		ok                         bool
	}{
		{"valid", "s3cret", body, good, true},
		{"missing", "s3cret", body, "", false},
		{"sha1 only", "s3cret", body, "sha1=" + strings.Repeat("0", 40), false},
		{"not hex", "s3cret", body, "sha256=zz" + good[9:], false},
		{"short", "s3cret", body, good[:20], false},
		{"wrong secret", "other", body, good, false},
		{"body changed", "s3cret", body + " ", good, false},
		{"uppercase hex", "s3cret", body, "sha256=" + strings.ToUpper(good[7:]), true},
		{"empty secret never verifies", "", body, sign("", body), false},
		{"sha512 refused", "s3cret", body, sign512("s3cret", body), false},
		{"sha1 refused", "s3cret", body, sign1("s3cret", body), false},
	} {
		err := VerifySignature([]byte(tc.secret), []byte(tc.body), tc.header)
		if tc.ok {
			assert.NoError(t, err, tc.name)
		} else {
			assert.ErrorIs(t, err, ErrSignature, tc.name)
		}
	}
}
