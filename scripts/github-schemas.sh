#!/usr/bin/env bash
# Installs GitHub's published API descriptions, pinned, from which `make schemas` regenerates
# the compact copies the tests read (internal/githubtest/testdata/schemas/, committed: make test
# needs only Go and git) and against which a test checks those copies (not committed: they are
# large and GitHub's, not ours):
#   @octokit/graphql-schema   GitHub's GraphQL schema (schema.graphql)
#   @octokit/openapi          GitHub's REST descriptions (generated/api.github.com.json,
#                             ghec.json, ghes-3.x.json)
#   @octokit/webhooks-schemas GitHub's webhook payload schemas (schema.json)
# into .cache/github-schemas/ of the repository. Safe to re-run: does nothing when present.
set -euo pipefail
cd "$(dirname "$0")/.."
GRAPHQL_SCHEMA_VERSION=15.26.1
OPENAPI_VERSION=23.0.2
WEBHOOKS_SCHEMAS_VERSION=7.6.1
dir=.cache/github-schemas
want="@octokit/graphql-schema@${GRAPHQL_SCHEMA_VERSION} @octokit/openapi@${OPENAPI_VERSION} @octokit/webhooks-schemas@${WEBHOOKS_SCHEMAS_VERSION}"
stamp="$dir/.installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
command -v npm >/dev/null 2>&1 || { echo "github-schemas: npm is needed (apt-get install npm)" >&2; exit 1; }
mkdir -p "$dir"
# shellcheck disable=SC2086 # $want is three package specs
npm install --silent --no-audit --no-fund --no-save --prefix "$dir" $want >/dev/null
test -s "$dir/node_modules/@octokit/graphql-schema/schema.graphql"
test -s "$dir/node_modules/@octokit/openapi/generated/api.github.com.json"
test -s "$dir/node_modules/@octokit/webhooks-schemas/schema.json"
echo "$want" > "$stamp"
echo "github-schemas: installed $want into $dir"
