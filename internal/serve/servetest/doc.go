// Package servetest is what the tests of fleetbot serve share, internal/serve's and cmd/bot's
// (test helpers, no product logic): a fake GitHub holding the example control repo (NewGitHub),
// serve's HTTP face as a test reads it (Get, Metric, Deliver), and waiting on events rather than
// time: a Waiter re-checks a condition each time something that may change it happens (the fake
// GitHub changed, serve logged a record or finished a job, a serve process wrote to its log),
// never on a timer; the test's deadline only turns a hang into a failure naming the condition.
package servetest
