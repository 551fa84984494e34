package yamlsize

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// billionLaughs is the classic alias bomb: 9 levels of 9 aliases each, a few hundred bytes
// that expand to 9^9 (387 million) strings.
const billionLaughs = `a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`

func TestCheckRefusesAliasBomb(t *testing.T) {
	err := Check([]byte(billionLaughs), DefaultMaxNodes)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrTooLarge))
	assert.Contains(t, err.Error(), "alias bomb")
}

func TestCheckAllowsOrdinaryYAML(t *testing.T) {
	ok := "env: &env [{name: A, value: x}]\nspec:\n  a: {env: *env}\n  b: {env: *env}\n---\nkind: ConfigMap\n"
	assert.NoError(t, Check([]byte(ok), DefaultMaxNodes), "a few aliases")
	assert.NoError(t, Check([]byte("a: [1, 2, 3]\n"), DefaultMaxNodes), "no alias")
	assert.NoError(t, Check([]byte("a: [unterminated\n"), DefaultMaxNodes), "bad YAML is the decoder's to report")
	big := "a:\n" + strings.Repeat("  - x\n", 2000) + "b: *a\n"
	big = strings.Replace(big, "a:\n", "a: &a\n", 1)
	assert.Error(t, Check([]byte(big), 3000), "the bound counts expanded nodes")
	assert.NoError(t, Check([]byte(big), 5000))
}
