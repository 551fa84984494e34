//go:build tools

package tools

import (
	_ "github.com/bradleyfalzon/ghinstallation/v2"
	_ "github.com/fluxcd/kustomize-controller/api/v1"
	_ "github.com/fluxcd/source-controller/api/v1"
	_ "github.com/go-git/go-git/v5"
	_ "github.com/go-git/go-git/v5/plumbing/format/index"
	_ "github.com/golang-jwt/jwt/v4"
	_ "github.com/google/go-github/v62/github"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "github.com/stretchr/testify/require"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/api/rbac/v1"
	_ "k8s.io/apimachinery/pkg/labels"
	_ "sigs.k8s.io/kustomize/api/krusty"
	_ "sigs.k8s.io/kustomize/kyaml/filesys"
	_ "sigs.k8s.io/yaml"
)
