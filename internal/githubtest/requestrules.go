package githubtest

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// Rules GitHub applies to a request before it reaches an endpoint: a User-Agent, and an App's
// JWT; and the rules of repository topics.

// userAgentRefusal is GitHub's answer to an API request without a User-Agent: "All API
// requests must include a valid User-Agent header. Requests with no User-Agent header will be
// rejected." GitHub answers 403 with this text (not JSON).
// https://docs.github.com/rest/using-the-rest-api/getting-started-with-the-rest-api#user-agent
const userAgentRefusal = "Request forbidden by administrative rules. Please make sure your request has a User-Agent header " +
	"(https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required). " +
	"Check https://developer.github.com for other possible causes.\n"

// refuseWithoutUserAgent writes GitHub's 403 to an API request without a User-Agent and
// reports whether it did. (A Go client sends "Go-http-client/1.1" unless told otherwise; curl
// and git send their own.)
func refuseWithoutUserAgent(w http.ResponseWriter, r *http.Request) bool {
	if strings.TrimSpace(r.Header.Get("User-Agent")) != "" {
		return false
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write([]byte(userAgentRefusal))
	return true
}

// JWT limits of a GitHub App: "exp ... must be no more than 10 minutes into the future"; iat
// "60 seconds in the past is recommended to allow for clock drift", the drift the fake allows
// an iat in the future.
// https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app
const (
	maxJWTLifetime = 10 * time.Minute
	jwtClockDrift  = 60 * time.Second
)

// GitHub's 401 messages for an App JWT it refuses.
const (
	jwtExpMessage      = "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	jwtExpTooFar       = "'Expiration time' claim ('exp') is too far in the future"
	jwtIatMessage      = "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
	jwtIssuerMessage   = "'Issuer' claim ('iss') must be an Integer"
	jwtUndecodable     = "A JSON web token could not be decoded"
	jwtExpBeforeIssued = "'Expiration time' claim ('exp') must be after the 'Issued at' claim ('iat')"
)

// checkJWTClaims applies GitHub's rules to the claims of an App JWT whose RS256 signature
// verified, at wall time now: an exp in the future, at most ten minutes ahead and after iat;
// an iat no further in the future than the clock drift GitHub allows; iss the App's id.
func checkJWTClaims(claims *jwt.RegisteredClaims, appID int64, now time.Time) *httpError {
	unauthorized := func(msg string) *httpError { return errorf(http.StatusUnauthorized, "%s", msg) }
	switch {
	case claims.ExpiresAt == nil || !claims.ExpiresAt.After(now):
		return unauthorized(jwtExpMessage)
	case claims.ExpiresAt.Sub(now) > maxJWTLifetime:
		return unauthorized(jwtExpTooFar)
	case claims.IssuedAt == nil || claims.IssuedAt.Sub(now) > jwtClockDrift:
		return unauthorized(jwtIatMessage)
	case !claims.ExpiresAt.After(claims.IssuedAt.Time):
		return unauthorized(jwtExpBeforeIssued)
	case claims.Issuer != strconv.FormatInt(appID, 10):
		return unauthorized(jwtIssuerMessage)
	}
	return nil
}

// Topic rules: "Topics must start with a lowercase letter or number, consist of 50 characters
// or less, and can include hyphens"; "You can add up to 20 topics to a repository"; "Topic
// names will be saved as lowercase" (an upper-case letter is lowered, not refused).
// https://docs.github.com/repositories/managing-your-repositorys-settings-and-features/customizing-your-repository/classifying-your-repository-with-topics,
// https://docs.github.com/rest/repos/repos#replace-all-repository-topics
var topicRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,49}$`)

// maxTopics is the most topics of a repository.
const maxTopics = 20

// normalizeTopics lowers names and checks them against GitHub's rules, returning the topics to
// store (duplicates once) or GitHub's 422 (whose errors are plain strings, as the operation's
// description says).
func normalizeTopics(names []string) ([]string, *httpError) {
	out := []string{}
	for _, n := range names {
		t := strings.ToLower(n)
		if !topicRe.MatchString(t) {
			return nil, &httpError{status: http.StatusUnprocessableEntity, message: "Validation Failed", simple: []string{
				fmt.Sprintf("%q: Topics must start with a lowercase letter or number, consist of 50 characters or less, and can include hyphens.", n)}}
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if len(out) > maxTopics {
		return nil, &httpError{status: http.StatusUnprocessableEntity, message: "Validation Failed", simple: []string{
			fmt.Sprintf("A repository cannot have more than %d topics.", maxTopics)}}
	}
	return out, nil
}
