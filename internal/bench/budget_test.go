package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestMinimumTime(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{
		{0, 0},
		{1, 0},
		{80, 0},
		{81, time.Minute},
		{500, 6 * time.Minute},            // 6 full minutes of 80, then 20
		{501, time.Hour},                  // the 501st waits for the first to leave the hour
		{1000, time.Hour + 6*time.Minute}, // the second hour repeats the first
		{4000, 7*time.Hour + 6*time.Minute},
	} {
		assert.Equal(t, tc.want, MinimumTime(tc.n, 80, 500), "n=%d", tc.n)
	}
}
