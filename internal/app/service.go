package app

import (
	"time"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// The application's vocabulary for front ends that keep state between runs (the webhook
// service): they name these types through the application layer, never the floors below.
type (
	// ControlRepo is a loaded and validated control repo.
	ControlRepo = control.Repo
	// Issues are control repo errors, each on its file and line with a hint; a load, a plan
	// or an apply returns them as its error when the control repo is wrong.
	Issues = control.Issues
	// Issue is one control repo error; Position is its file and line.
	Issue    = control.Issue
	Position = control.Position
	// Forge is the forge of one owner's target repos, as plan and apply use it.
	Forge = reconcile.Forge
	// Renderer renders a control repo into its target repos; a long-lived one (serve's) caches
	// kustomize builds between runs.
	Renderer = fanout.Renderer
	// Shard is one replica's share of the target repos (docs/scale-out.md); the zero Shard
	// owns every repo.
	Shard = reconcile.Shard
	// Partition is a live Shard's share at one instant (replicas on Kubernetes Leases).
	Partition = reconcile.Partition
	// RepoResult is one target repo of a Result.
	RepoResult = reconcile.Result
	// PlannedWave is one wave of a rollout plan and the clusters it takes.
	PlannedWave = rollout.PlannedWave
	// Rollouts is the rollout slice's entry for a control repo (Fleet.Rollouts).
	Rollouts = rollout.Rollouts
)

// The rollout's names in the control repo, for front ends that print them.
const (
	// FluxStatusPrefix starts the context of the commit statuses Flux's notification-controller
	// posts for a Kustomization: only those count as a cluster's health.
	FluxStatusPrefix = rollout.FluxStatusPrefix
	// PhasePlan is the phase of a run that reads and decides each target repo
	// (Request.Step).
	PhasePlan = reconcile.PhasePlan
	// PausedFile is the control repo file whose presence pauses every rollout.
	PausedFile = control.PausedFile
)

// RulesetName is the name of the ruleset fleetbot converges on a target repo, or once on the
// org (branch rules as code): serve's ingress tells fleetbot's org ruleset from others by it.
const RulesetName = policy.RulesetName

// ParseShard reads a --shard value, "INDEX/COUNT" (e.g. "2/5"); "" owns every repo.
func ParseShard(s string) (Shard, error) { return reconcile.ParseShard(s) }

// Reports is what a service knows of the fleet from its own applies: the newest result of
// each target repo. Reading it costs no request (the status pages are built from it).
type Reports struct {
	// Source is the control-repo commit of the newest apply, and Control the control repo
	// loaded at it (labels); nil before the first apply.
	Source  string
	Control *ControlRepo
	// Repos holds one entry per target repo, sorted by repo.
	Repos []RepoReport
	// Run is the apply in progress, if one runs: the target repos it plans and how far it
	// is (a large fleet's first apply takes minutes); nil otherwise.
	Run *StatusRun
}

// RepoReport is the result of the newest apply that covered one target repo.
type RepoReport struct {
	Result RepoResult
	// Source is the control-repo commit that apply rendered; At is when it finished.
	Source string
	At     time.Time
}
