// Package webhook is fleetbot's webhook service (fleetbot serve): the jobs that signed GitHub
// events become (internal/ingress decides which), and the Service that does them.
//
// A Job says what to do (Kind: apply, drift, check, tenant) and on which repo. The jobs wait in
// the generic job queue of internal/jobqueue under this package's rules (Policy, NewQueue): one
// job per Job.Key (every push to the control repo's default branch is one apply of the fleet,
// every event on a target repo one drift reconcile of that repo, every control pull request
// one check); an apply claims the target repos it writes through the Lease the pool passes to
// Service.Execute, and a full apply absorbs the waiting drifts, which it covers; the drifts of
// one owner batch together (held DefaultDriftDelay so that more join) and run as one apply
// limited to their repos (Service.ExecuteBatch), reporting each job on its own; while the batch
// waits for the control head's render (Service.StageBatch), the pool takes in the drifts of its
// owner arriving meanwhile. Resync queues a full apply periodically, so a missed delivery, a
// refused one or a crash costs at most one interval.
//
// The work itself is the one code path of the CLI: Service loads the
// control repo at a commit (ControlSource), renders it with a long-lived
// renderer (app.Runner.Render) and calls the application layer's one door,
// app.Runner.Run: an apply (push, resync, drift with app.Scope.Repos) or a
// plan on a read-only forge (the check run of a control pull request, which
// never writes to a target repo).
//
// Which event becomes which job (internal/ingress's handlers decide):
//
//	event                              repo        job
//	push (default branch)              control     apply
//	pull_request opened/synchronize/   control     check (check run with the plan)
//	  reopened
//	check_run rerequested              control     check
//	pull_request opened/synchronize/   workspace,  tenant (the "fleetbot tenant" check run:
//	  reopened (fleetbot's own too),   cluster     check workspace / check cluster on the
//	  check_run rerequested                        head; other repos: nothing)
//	installation, installation_repos.  -           apply
//	push (default branch),             target      drift (that repo only)
//	  pull_request closed, repository,
//	  member, team, branch_protection_rule,
//	  repository_ruleset
//	repository_ruleset of fleetbot's   -           apply (the org ruleset, read once)
//	  org ruleset
//	status (Flux, kustomization/...),   cluster of  apply (the rollout's next wave)
//	  pull_request closed               a rollout
//	a soak ends, a health timeout       -           apply (RolloutWatch's wake-up)
//
// With rollout waves, every full apply tells the RolloutWatch which cluster
// repos take part and when time alone changes the verdict, and updates the
// "fleetbot rollout" check run on the control commit (RolloutChecks).
//
// Events whose sender is fleetbot's own bot account are ignored, but for its pull requests to
// workspace and cluster repos, whose protection requires the tenant check of every head; other
// bots' are not ignored.
//
// With a tenant check configured (ServiceConfig.TenantCheck), every control repo commit the
// service renders requires that check, bound to the App, in the protection of its workspace and
// cluster repos, on owners where the App may write check runs (ServiceConfig.CanCheck, asked
// again at every full apply).
package webhook
