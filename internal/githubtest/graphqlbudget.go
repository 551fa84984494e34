package githubtest

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
)

// GitHub's GraphQL API has its own primary budget, apart from the REST API's, counted in
// points: "For GitHub App installations not on a GitHub Enterprise Cloud organization: 5,000
// points per hour per installation" (5,000 per user for a personal access token; the fake keeps
// GitHub's floor, without the extra points an installation earns per repository and user).
// "Calculating a rate limit score before running the call": add up the requests needed to
// fulfil each connection (a connection is asked once per node of the connections it is nested
// in, each assumed to reach its first or last), divide by 100 and round to the nearest whole
// number; "The minimum point value for a call to the GraphQL API is 1". rateLimit answers the
// call's cost, the budget left after it (remaining, used, limit, resetAt) and nodeCount, the
// nodes the call may return at most. A call over the budget is answered 200 with an error of
// type RATE_LIMITED and x-ratelimit-remaining: 0, as the documentation says.
// https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api

// DefaultGraphQLLimit is GitHub's GraphQL budget per hour.
const DefaultGraphQLLimit = 5000

// graphQLDocURL is the documentation of the GraphQL budget.
const graphQLDocURL = "https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api"

// WithGraphQLLimit sets the GraphQL budget in points per (fake) hour for each token or
// installation; 0 disables it. Without it the budget is DefaultGraphQLLimit, or none when
// WithPrimaryLimit(0) turned the REST budget off.
func WithGraphQLLimit(pointsPerHour int) Option {
	return func(c *config) { c.graphQLLimit, c.graphQLLimitSet = pointsPerHour, true }
}

// graphQLLimit is the budget in force (0: none).
func (s *Server) graphQLLimit() int {
	switch {
	case s.cfg.graphQLLimitSet:
		return s.cfg.graphQLLimit
	case s.cfg.primaryLimit <= 0:
		return 0
	}
	return DefaultGraphQLLimit
}

// graphQLCost is a call's rate-limit score and node count, computed from its selection before
// it runs.
type graphQLCost struct {
	points, nodes int
}

// costOf computes the score of an operation with its variables.
func costOf(doc *ast.QueryDocument, op *ast.OperationDefinition, vars map[string]any) graphQLCost {
	requests, nodes := 0, 0
	var walk func(set ast.SelectionSet, multiplier int, seen map[string]bool)
	walk = func(set ast.SelectionSet, multiplier int, seen map[string]bool) {
		for _, sel := range set {
			switch sel := sel.(type) {
			case *ast.Field:
				inner := multiplier
				if n, ok := pageSize(sel, vars); ok {
					requests += multiplier
					inner = multiplier * n
					nodes += inner
				}
				walk(sel.SelectionSet, inner, seen)
			case *ast.InlineFragment:
				walk(sel.SelectionSet, multiplier, seen)
			case *ast.FragmentSpread:
				if f := doc.Fragments.ForName(sel.Name); f != nil && !seen[sel.Name] {
					seen[sel.Name] = true
					walk(f.SelectionSet, multiplier, seen)
					delete(seen, sel.Name)
				}
			}
		}
	}
	walk(op.SelectionSet, 1, map[string]bool{})
	points := int(math.Round(float64(requests) / 100))
	return graphQLCost{points: max(points, 1), nodes: nodes}
}

// pageSize is the first or last argument of a connection field (the page it asks for).
func pageSize(f *ast.Field, vars map[string]any) (int, bool) {
	for _, name := range []string{"first", "last"} {
		a := f.Arguments.ForName(name)
		if a == nil {
			continue
		}
		v, err := a.Value.Value(vars)
		if err != nil {
			continue
		}
		if n, ok := intArg(v); ok && n > 0 {
			return int(n), true
		}
	}
	return 0, false
}

// isDryRun reports whether the operation asks rateLimit(dryRun: true): its cost is answered,
// not spent.
func isDryRun(op *ast.OperationDefinition, vars map[string]any) bool {
	for _, sel := range op.SelectionSet {
		if f, ok := sel.(*ast.Field); ok && f.Name == "rateLimit" {
			if a := f.Arguments.ForName("dryRun"); a != nil {
				if v, err := a.Value.Value(vars); err == nil && v == true {
					return true
				}
			}
		}
	}
	return false
}

// graphQLRate is a principal's GraphQL budget after a call.
type graphQLRate struct {
	cost      graphQLCost
	limit     int // 0: no budget
	used      int
	remaining int
	reset     time.Time // fake time
	limited   bool      // the call was refused: over budget
}

// spendGraphQL charges cost to key's GraphQL budget (unless dryRun) and returns the budget
// after it; a call costing more than what remains is refused and charges nothing.
func (s *Server) spendGraphQL(key string, cost graphQLCost, dryRun bool) graphQLRate {
	now := s.clock.Now()
	limit := s.graphQLLimit()
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	b := s.bucketLocked(key, now)
	if now.Sub(b.graphQLStart) >= time.Hour || b.graphQLStart.IsZero() {
		b.graphQLStart, b.graphQLUsed = now, 0
	}
	rate := graphQLRate{cost: cost, limit: limit, reset: b.graphQLStart.Add(time.Hour)}
	switch {
	case limit > 0 && b.graphQLUsed+cost.points > limit:
		rate.limited = true
	case !dryRun:
		b.graphQLUsed += cost.points
	}
	rate.used = b.graphQLUsed
	if limit > 0 {
		rate.remaining = max(limit-b.graphQLUsed, 0)
	} else {
		rate.remaining = math.MaxInt32
		rate.limit = math.MaxInt32
	}
	if rate.limited {
		rate.remaining = 0
	}
	return rate
}

// setGraphQLRateHeaders sets the x-ratelimit-* headers of a GraphQL answer, resource graphql.
func (s *Server) setGraphQLRateHeaders(h http.Header, rate graphQLRate) {
	h.Set("X-Ratelimit-Limit", strconv.Itoa(rate.limit))
	h.Set("X-Ratelimit-Remaining", strconv.Itoa(rate.remaining))
	h.Set("X-Ratelimit-Used", strconv.Itoa(rate.used))
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(s.clock.toWall(rate.reset).Add(time.Second-1).Unix(), 10))
	h.Set("X-Ratelimit-Resource", "graphql")
}

// rateLimitObject is Query.rateLimit for a call.
func (s *Server) rateLimitObject(rate graphQLRate) gqlObject {
	return &gqlPlain{name: "RateLimit", fields: map[string]any{
		"cost": rate.cost.points, "limit": rate.limit, "remaining": rate.remaining, "used": rate.used,
		"nodeCount": rate.cost.nodes, "resetAt": gqlDateTime(s.clock.toWall(rate.reset).Add(time.Second - 1).Truncate(time.Second)),
	}}
}

// graphQLBudget is GET /rate_limit's graphql resource for key, its budget spent so far.
func (s *Server) graphQLBudget(key string) map[string]any {
	rate := s.spendGraphQL(key, graphQLCost{}, true)
	return map[string]any{"limit": rate.limit, "remaining": rate.remaining, "used": rate.used,
		"reset": s.clock.toWall(rate.reset).Add(time.Second - 1).Unix(), "resource": "graphql"}
}
