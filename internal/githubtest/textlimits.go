package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// The sizes GitHub allows for the texts fleetbot writes, and the unit each is measured in. GitHub
// documents some in "characters" and measures them in bytes; the fake measures as GitHub does,
// so that a text GitHub refuses is refused here too (docs/github.md, "Rules of the fake").
const (
	// maxCheckRunText is the most bytes of a check run's output.summary or output.text. The
	// REST reference says "Maximum length: 65535 characters"; GitHub answers a longer one in
	// bytes with 422 "summary exceeds a maximum bytesize of 65535" (github/docs#35252,
	// github/rest-api-description#5399).
	// https://docs.github.com/rest/checks/runs#create-a-check-run
	maxCheckRunText = 65535
	// maxAnnotations is the most annotations of one check run request ("The Checks API limits
	// the number of annotations to a maximum of 50 per API request").
	// https://docs.github.com/rest/checks/runs#create-a-check-run
	maxAnnotations = 50
	// maxAnnotationMessage is the most bytes of an annotation's message or raw_details ("The
	// maximum size is 64 KB"); maxAnnotationTitle the most characters of its title ("The
	// maximum size is 255 characters").
	// https://docs.github.com/rest/checks/runs#update-a-check-run
	maxAnnotationMessage = 64 << 10
	maxAnnotationTitle   = 255
	// maxPullBody is the most characters of a pull request body: 422 "body is too long
	// (maximum is 65536 characters)". GitHub documents no limit; the message is its answer,
	// and characters (code points, ASCII or not) are what it counts on a pull request body
	// (measured: https://github.com/dead-claudia/github-limits/pull/13).
	// https://docs.github.com/rest/pulls/pulls#create-a-pull-request
	maxPullBody = 65536
	// maxStoredText is the most bytes of an issue body or an issue (or pull request) comment:
	// GitHub stores them in 262,144 bytes (65,536 four-byte characters) and refuses more with
	// the same "maximum is 65536 characters" message, counting bytes (measured on both, see
	// maxPullBody's reference).
	// https://docs.github.com/rest/issues/comments#create-an-issue-comment
	maxStoredText = 262144
)

// validationError is GitHub's 422 "Validation Failed" with one error.
func validationError(resource, field, code, message string) *httpError {
	return &httpError{status: http.StatusUnprocessableEntity, message: "Validation Failed",
		errors: []fieldError{{Resource: resource, Field: field, Code: code, Message: message}}}
}

// pullBodyError refuses a pull request body GitHub refuses.
func pullBodyError(body string) *httpError {
	if utf8.RuneCountInString(body) > maxPullBody || len(body) > maxStoredText {
		return validationError("Issue", "body", "custom", fmt.Sprintf("body is too long (maximum is %d characters)", maxPullBody))
	}
	return nil
}

// issueBodyError refuses an issue body GitHub refuses (measured in bytes).
func issueBodyError(body string) *httpError {
	if len(body) > maxStoredText {
		return validationError("Issue", "body", "custom", fmt.Sprintf("body is too long (maximum is %d characters)", maxPullBody))
	}
	return nil
}

// commentBodyError refuses an issue or pull request comment GitHub refuses (measured in bytes;
// GitHub reports the field as "data").
func commentBodyError(body string) *httpError {
	if len(body) > maxStoredText {
		return validationError("IssueComment", "data", "unprocessable", fmt.Sprintf("Body is too long (maximum is %d characters)", maxPullBody))
	}
	return nil
}

// checkRunOutput is the part of a check run's output GitHub bounds.
type checkRunOutput struct {
	Title       *string `json:"title"`
	Summary     *string `json:"summary"`
	Text        *string `json:"text"`
	Annotations []struct {
		Message    string `json:"message"`
		Title      string `json:"title"`
		RawDetails string `json:"raw_details"`
	} `json:"annotations"`
}

// checkRunOutputError refuses a check run output GitHub refuses: a summary or text over
// maxCheckRunText bytes, more than maxAnnotations annotations, an annotation too large.
func checkRunOutputError(raw json.RawMessage) *httpError {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var o checkRunOutput
	if err := json.Unmarshal(raw, &o); err != nil {
		return errBadRequest
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"summary", o.Summary}, {"text", o.Text}} {
		if f.v != nil && len(*f.v) > maxCheckRunText {
			return validationError("CheckRun", f.name, "custom", fmt.Sprintf("%s exceeds a maximum bytesize of %d", f.name, maxCheckRunText))
		}
	}
	if len(o.Annotations) > maxAnnotations {
		return validationError("CheckRun", "annotations", "custom",
			fmt.Sprintf("Only %d annotations may be sent per request; %d were sent.", maxAnnotations, len(o.Annotations)))
	}
	for _, a := range o.Annotations {
		switch {
		case len(a.Message) > maxAnnotationMessage:
			return validationError("CheckRun", "message", "custom", fmt.Sprintf("message exceeds a maximum bytesize of %d", maxAnnotationMessage))
		case len(a.RawDetails) > maxAnnotationMessage:
			return validationError("CheckRun", "raw_details", "custom", fmt.Sprintf("raw_details exceeds a maximum bytesize of %d", maxAnnotationMessage))
		case utf8.RuneCountInString(a.Title) > maxAnnotationTitle:
			return validationError("CheckRun", "title", "custom", fmt.Sprintf("title is too long (maximum is %d characters)", maxAnnotationTitle))
		}
	}
	return nil
}
