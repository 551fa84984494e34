package github

import (
	"fmt"

	gh "github.com/google/go-github/v62/github"
)

// PerPage is the page size fleetbot asks GitHub for in every listing: the largest most REST
// listings accept, so a listing costs as few requests as it can.
const PerPage = 100

// Lister reads one page of a GitHub listing: opts carries the page size and the page number
// (0 for the first page, as GitHub's own first-page URL has none). The closure copies opts into
// the method's own options (gh.ListCollaboratorsOptions and friends embed gh.ListOptions).
// A nil *gh.Response is read as "no further page".
type Lister[T any] func(opts gh.ListOptions) ([]T, *gh.Response, error)

// EachPage reads a listing page by page, following the page GitHub names next (its Link
// header), and hands each page to visit. It stops at the last page, at the first error of list
// (returned as list returned it, for the caller to wrap with what was being listed), or when
// visit returns stop or an error. Stopping early saves the requests for the pages not read.
//
// This is the one pagination loop of fleetbot's GitHub code; go-github v62 has none of its own.
func EachPage[T any](list Lister[T], visit func(page []T) (stop bool, err error)) error {
	return eachPageFrom(0, list, visit)
}

// AllPages reads every page of a listing and returns its items in order.
func AllPages[T any](list Lister[T]) ([]T, error) {
	return allPagesFrom(0, list)
}

func allPagesFrom[T any](page int, list Lister[T]) ([]T, error) {
	var all []T
	err := eachPageFrom(page, list, func(items []T) (bool, error) {
		all = append(all, items...)
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return all, nil
}

// eachPageFrom is EachPage starting at page (0 being the first): listRepos reads a tail that
// grew while its pages were being read concurrently.
func eachPageFrom[T any](page int, list Lister[T], visit func(page []T) (stop bool, err error)) error {
	for {
		items, resp, err := list(gh.ListOptions{PerPage: PerPage, Page: page})
		if err != nil {
			return err
		}
		if stop, err := visit(items); stop || err != nil {
			return err
		}
		if resp == nil || resp.NextPage == 0 {
			return nil
		}
		if resp.NextPage <= max(page, 1) {
			// A Link header naming this page or an earlier one would loop for ever.
			return fmt.Errorf("GitHub named page %d as the next after page %d of a listing; fleetbot stops reading it rather than loop (a proxy rewriting Link headers?)", resp.NextPage, max(page, 1))
		}
		page = resp.NextPage
	}
}
