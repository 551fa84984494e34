package browsertest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoadMeasuresEachWidth: the instrument can fail: a page 1,000 px wide overflows a 420 px
// viewport and fits a 1,400 px one, measured in one chromium run, with each frame's DOM.
func TestLoadMeasuresEachWidth(t *testing.T) {
	t.Parallel()
	bin := Chromium(t)
	views := Load(t, bin, `<!doctype html><html><body><div id="x" style="width:1000px">wide</div></body></html>`, Wide, Narrow)
	require.Len(t, views, 2)
	assert.Equal(t, View{Width: Wide, Scroll: Wide, Inner: Wide}, View{Width: views[0].Width, Scroll: views[0].Scroll, Inner: views[0].Inner})
	assert.Equal(t, Narrow, views[1].Inner)
	assert.Greater(t, views[1].Scroll, views[1].Inner, "a 1000 px page overflows a 420 px viewport")
	assert.True(t, views[1].Overflows())
	assert.False(t, views[0].Overflows())
	assert.Contains(t, views[0].DOM, `<div id="x" style="width:1000px">wide</div>`)
}
