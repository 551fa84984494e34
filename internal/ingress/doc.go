// Package ingress is fleetbot serve's webhook ingress: signed GitHub deliveries in, the service's
// jobs (webhook.Job) pushed on its queue out.
//
// A delivery goes through the Dispatcher (POST only, body cap, one of a few unverified slots,
// X-Hub-Signature-256 in constant time before any parsing: VerifySignature; dedupe by
// X-GitHub-Delivery) to the one Handler of its event (Handlers: push, pull_request, check_run,
// installation, the drift events of target repos, Flux's commit statuses), which decides within
// microseconds whether there is work and pushes a Job on the Queue; the HTTP answer (202) does
// not wait for the work, and a full queue is 503. Server is the HTTP face of serve (/webhook,
// /healthz, /readyz, /metrics).
//
// With serve --job-process, the Front answers GitHub in a process of its own, as the Dispatcher
// would refuse what it refuses, and hands what it acknowledged to the job process in signed
// batches (Dispatcher.ServeBatch), which dispatches each as POST /webhook would.
package ingress
