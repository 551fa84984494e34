package bench

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestHistogramQuantile: a percentile of serve's ack histogram over the load is the upper
// bound of the bucket holding it, counted from the observations made between two scrapes.
func TestHistogramQuantile(t *testing.T) {
	t.Parallel()
	bounds := []float64{.0001, .001, .005, math.Inf(1)}
	before := histogram{bounds: bounds, counts: []float64{10, 10, 10, 10}}
	after := histogram{bounds: bounds, counts: []float64{100, 195, 209, 210}}
	load := after.sub(before) // 90, 185, 199, 200 of 200
	assert.Equal(t, 100*time.Microsecond, load.quantile(0.45))
	assert.Equal(t, time.Millisecond, load.quantile(0.50))
	assert.Equal(t, 5*time.Millisecond, load.quantile(0.99))
	assert.Equal(t, 10*time.Millisecond, load.quantile(1), "beyond every finite bucket: twice the largest bound")
	assert.Equal(t, time.Duration(0), histogram{bounds: bounds, counts: make([]float64, 4)}.quantile(0.99), "no observation")
}
