package github

import (
	"context"
	"fmt"
)

// addLabels adds labels to an issue or pull request with the body GitHub documents,
// {"labels": [...]}: go-github v62's AddLabelsToIssue sends a bare array, which GitHub still
// takes but its REST description no longer does.
// https://docs.github.com/rest/issues/labels#add-labels-to-an-issue
func (f *Forge) addLabels(ctx context.Context, owner, repo string, number int, labels []string) error {
	u := fmt.Sprintf("repos/%s/%s/issues/%d/labels", owner, repo, number)
	req, err := f.api.NewRequest("POST", u, struct {
		Labels []string `json:"labels"`
	}{labels})
	if err != nil {
		return err
	}
	_, err = f.api.Do(ctx, req, nil)
	return err
}
