// Package github is the HTTP and client layer of fleetbot's GitHub forge.
//
// fleetbot fans one control repo out into thousands of target repos, so every request counts
// against GitHub's limits: 5,000–12,500 REST requests per hour per installation, and at most
// 80 content-creating requests per minute and 500 per hour. New builds a go-github client whose
// transport enforces those limits by construction. From the caller inwards:
//
//	ReadOnlyTransport   plan cannot write: non-GET requests fail before reaching the network
//	CacheTransport      ETag/Last-Modified conditional GETs; GitHub does not charge 304s
//	RetryTransport      5xx backoff, Retry-After, x-ratelimit-reset, ErrRateLimited
//	BudgetTransport     one mutation in flight, content-creation windows, shared pauses
//	ReadLimitTransport  bounded concurrent reads
//	auth                installation token (GitHub App) or personal token
//	CountingTransport   requests by class and status, as they reach the network
//
// Each transport is a small http.RoundTripper usable on its own; Client wires them and exposes
// their statistics. Classify turns any error from the chain or from go-github into the decision
// the reconcile loop needs: retry, wait for a rate limit, give up, or treat as missing.
package github
