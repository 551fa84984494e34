package github

import (
	"errors"
	"testing"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeListing serves pages of ints as go-github would: page 0 is the first page, and each
// answer names the next page (0 after the last). It records the pages asked for.
type fakeListing struct {
	pages map[int][]int // page number (0 = first) -> items
	next  map[int]int   // page number -> NextPage of its answer
	asked []int
}

func (l *fakeListing) list(o gh.ListOptions) ([]int, *gh.Response, error) {
	l.asked = append(l.asked, o.Page)
	if o.PerPage != PerPage {
		return nil, nil, errors.New("wrong page size")
	}
	return l.pages[o.Page], &gh.Response{NextPage: l.next[o.Page]}, nil
}

func threePages() *fakeListing {
	return &fakeListing{
		pages: map[int][]int{0: {1, 2}, 2: {3, 4}, 3: {5}},
		next:  map[int]int{0: 2, 2: 3},
	}
}

func TestAllPagesFollowsNextPage(t *testing.T) {
	t.Parallel()
	l := threePages()
	got, err := AllPages(l.list)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3, 4, 5}, got)
	assert.Equal(t, []int{0, 2, 3}, l.asked, "first page without a number, then the pages GitHub named")
}

func TestAllPagesFromStartsAtThePageGiven(t *testing.T) {
	t.Parallel()
	l := threePages()
	got, err := allPagesFrom(2, l.list)
	require.NoError(t, err)
	assert.Equal(t, []int{3, 4, 5}, got)
	assert.Equal(t, []int{2, 3}, l.asked)
}

func TestEachPageStopsWhenVisitStops(t *testing.T) {
	t.Parallel()
	l := threePages()
	var seen []int
	err := EachPage(l.list, func(items []int) (bool, error) {
		seen = append(seen, items...)
		return true, nil
	})
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2}, seen)
	assert.Equal(t, []int{0}, l.asked, "no request for the pages after a stop")
}

func TestEachPageReturnsVisitAndListErrorsAsTheyAre(t *testing.T) {
	t.Parallel()
	bad := errors.New("bad team")
	l := threePages()
	err := EachPage(l.list, func([]int) (bool, error) { return false, bad })
	assert.Same(t, bad, err)
	assert.Equal(t, []int{0}, l.asked)

	failed := errors.New("502 from GitHub")
	calls := 0
	got, err := AllPages(func(o gh.ListOptions) ([]int, *gh.Response, error) {
		calls++
		if o.Page == 2 {
			return nil, nil, failed
		}
		return []int{1}, &gh.Response{NextPage: 2}, nil
	})
	assert.Same(t, failed, err)
	assert.Nil(t, got, "no partial listing on error")
	assert.Equal(t, 2, calls)
}

func TestEachPageNilResponseEndsTheListing(t *testing.T) {
	t.Parallel()
	got, err := AllPages(func(gh.ListOptions) ([]int, *gh.Response, error) { return []int{7}, nil, nil })
	require.NoError(t, err)
	assert.Equal(t, []int{7}, got)
}

// TestEachPageRefusesALoopingLink: a Link header naming the same or an earlier page (a broken
// proxy, a hostile server) ends the listing with an error instead of looping for ever.
func TestEachPageRefusesALoopingLink(t *testing.T) {
	t.Parallel()
	for name, l := range map[string]*fakeListing{
		"first page names page 1": {pages: map[int][]int{0: {1}}, next: map[int]int{0: 1}},
		"page 2 names itself":     {pages: map[int][]int{0: {1}, 2: {2}}, next: map[int]int{0: 2, 2: 2}},
		"page 3 names page 2":     {pages: map[int][]int{0: {1}, 2: {2}, 3: {3}}, next: map[int]int{0: 2, 2: 3, 3: 2}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := AllPages(l.list)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "as the next after page")
			assert.Nil(t, got)
			assert.LessOrEqual(t, len(l.asked), 3)
		})
	}
}
