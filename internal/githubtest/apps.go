package githubtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/google/go-github/v62/github"
)

// principal is who a request is authenticated as.
type principal struct {
	login          string // "" when anonymous or the App itself
	kind           string // user, installation, app, anonymous
	installationID int64
	bucket         string // primary-limit bucket
	tokenExpiry    string
	// perms and repos narrow an installation token (nil: the App's permissions, every
	// repository of the installation).
	perms map[string]string
	repos map[string]bool
}

type principalKey struct{}

func principalOf(r *http.Request) principal {
	p, _ := r.Context().Value(principalKey{}).(principal)
	return p
}

// appRoutes are authenticated with the App's JWT instead of a token.
var appRoutes = map[string]bool{
	"GET /app":                                         true,
	"GET /app/installations":                           true,
	"GET /app/hook/deliveries":                         true,
	"GET /app/hook/deliveries/{delivery_id}":           true,
	"POST /app/hook/deliveries/{delivery_id}/attempts": true,
	"GET /app/installations/{id}":                      true,
	"POST /app/installations/{id}/access_tokens":       true,
	"GET /orgs/{org}/installation":                     true,
	"GET /users/{username}/installation":               true,
	"GET /repos/{owner}/{repo}/installation":           true,
}

// authenticate resolves the Authorization header (or git's basic auth) to a principal.
func (s *Server) authenticate(r *http.Request, isAPI bool, route string) (principal, *httpError) {
	var cred string
	if isAPI {
		h := r.Header.Get("Authorization")
		scheme, rest, _ := strings.Cut(h, " ")
		switch strings.ToLower(scheme) {
		case "token", "bearer":
			cred = strings.TrimSpace(rest)
		case "basic":
			if _, pw, ok := r.BasicAuth(); ok {
				cred = pw
			}
		}
	} else if user, pw, ok := r.BasicAuth(); ok {
		cred = pw
		if pw == "" || pw == "x-oauth-basic" {
			cred = user
		}
	}
	if cred == "" {
		anon := principal{kind: "anonymous", bucket: "anonymous:" + remoteHost(r)}
		if route == "GET /rate_limit" || route == "GET /" || route == "GET /meta" {
			return anon, nil
		}
		reads := r.Method == http.MethodGet || strings.HasSuffix(r.URL.Path, "/git-upload-pack")
		if s.cfg.anonymousReads && reads {
			return anon, nil
		}
		return principal{}, &httpError{status: http.StatusUnauthorized, message: "Requires authentication"}
	}
	if appRoutes[route] {
		if err := s.verifyJWT(cred); err != nil {
			return principal{}, err
		}
		return principal{kind: "app", bucket: "app:" + strconv.FormatInt(s.cfg.appID, 10)}, nil
	}
	s.mu.Lock()
	tok := s.st.Tokens[cred]
	s.mu.Unlock()
	if tok == nil {
		return principal{}, &httpError{status: http.StatusUnauthorized, message: "Bad credentials"}
	}
	p := principal{login: tok.Login, kind: "user", bucket: "user:" + strings.ToLower(tok.Login)}
	if tok.InstallationID != 0 {
		if !s.clock.Now().Before(tok.ExpiresAt) {
			return principal{}, &httpError{status: http.StatusUnauthorized, message: "Bad credentials"}
		}
		p.kind = "installation"
		p.installationID = tok.InstallationID
		p.perms = tok.Permissions
		if tok.Repos != nil {
			p.repos = map[string]bool{}
			for _, k := range tok.Repos {
				p.repos[k] = true
			}
		}
		p.bucket = "installation:" + strconv.FormatInt(tok.InstallationID, 10)
	}
	return p, nil
}

func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// verifyJWT checks an App JWT as GitHub does: RS256 signed by the App key, then its claims
// (checkJWTClaims). Times are wall-clock: the client signs with its clock.
func (s *Server) verifyJWT(raw string) *httpError {
	pub, err := s.appPublicKey()
	if err != nil {
		return errorf(http.StatusInternalServerError, "fake github: %v", err)
	}
	claims := &jwt.RegisteredClaims{}
	parser := jwt.NewParser(jwt.WithValidMethods([]string{"RS256"}), jwt.WithoutClaimsValidation())
	if _, err := parser.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return pub, nil }); err != nil {
		return errorf(http.StatusUnauthorized, "%s", jwtUndecodable)
	}
	return checkJWTClaims(claims, s.cfg.appID, time.Now())
}

// testAppKey is the App key of every NewServer of a test binary (unless given another),
// generated once: read-only afterwards.
var testAppKey = sync.OnceValues(func() (*rsa.PrivateKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generating app key: %w", err)
	}
	return key, nil
})

// appPublicKey returns the App's public key, generating a key pair on first use.
func (s *Server) appPublicKey() (*rsa.PublicKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.appPub == nil {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, fmt.Errorf("generating app key: %w", err)
		}
		s.cfg.appKey, s.cfg.appPub = key, &key.PublicKey
	}
	return s.cfg.appPub, nil
}

// AppID is the id of the fake's GitHub App.
func (s *Server) AppID() int64 { return s.cfg.appID }

// AppPrivateKeyPEM returns the App's private key as PKCS#1 PEM (what GitHub hands out), generating
// a key pair on first use. It is nil when the server was given only a public key.
func (s *Server) AppPrivateKeyPEM() []byte {
	if _, err := s.appPublicKey(); err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.appKey == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(s.cfg.appKey)})
}

func (s *Server) botLogin() string { return s.cfg.appSlug + "[bot]" }

// installLocked installs the App on an account (idempotent) and returns the installation id.
func (s *Server) installLocked(login string) int64 {
	for _, in := range s.st.Installations {
		if strings.EqualFold(in.Account, login) {
			return in.ID
		}
	}
	id := s.st.nextID()
	s.st.Installations[id] = &installation{ID: id, Account: login, Created: s.clock.Now()}
	s.queueEvent("installation", func() map[string]any { return s.installationPayloadLocked("created", id) })
	return id
}

func (s *Server) installationJSON(in *installation) *github.Installation {
	acct := s.st.Accounts[strings.ToLower(in.Account)]
	base := s.APIURL()
	return &github.Installation{
		ID:                  github.Int64(in.ID),
		AppID:               github.Int64(s.cfg.appID),
		AppSlug:             github.String(s.cfg.appSlug),
		TargetID:            github.Int64(acct.ID),
		TargetType:          github.String(acct.Type),
		Account:             s.userJSON(acct.Login),
		RepositorySelection: github.String("all"),
		AccessTokensURL:     github.String(fmt.Sprintf("%sapp/installations/%d/access_tokens", base, in.ID)),
		RepositoriesURL:     github.String(base + "installation/repositories"),
		HTMLURL:             github.String(fmt.Sprintf("%s/organizations/%s/settings/installations/%d", s.URL, acct.Login, in.ID)),
		Permissions:         installationPermissions(s.grantedPermissions()),
		Events:              s.appEvents(),
		CreatedAt:           &github.Timestamp{Time: in.Created},
		UpdatedAt:           &github.Timestamp{Time: in.Created},
	}
}

func (s *Server) handleGetApp(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.appJSON(s.clock.Now()))
}

func (s *Server) handleListInstallations(w http.ResponseWriter, r *http.Request) {
	var out []map[string]any
	for _, id := range slices.Sorted(maps.Keys(s.st.Installations)) {
		out = append(out, s.fullInstallationJSON(s.st.Installations[id]))
	}
	writePage(w, r, out)
}

func (s *Server) handleGetInstallation(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	in := s.st.Installations[id]
	if in == nil {
		writeErr(w, errNotFound)
		return
	}
	writeJSON(w, http.StatusOK, s.fullInstallationJSON(in))
}

// handleAccountInstallation serves /orgs/{org}/installation, /users/{username}/installation and
// /repos/{owner}/{repo}/installation.
func (s *Server) handleAccountInstallation(w http.ResponseWriter, r *http.Request) {
	login := r.PathValue("org") + r.PathValue("username") + r.PathValue("owner")
	for _, in := range s.st.Installations {
		if strings.EqualFold(in.Account, login) {
			writeJSON(w, http.StatusOK, s.fullInstallationJSON(in))
			return
		}
	}
	writeErr(w, errNotFound)
}

// handleCreateAccessToken mints an installation token, narrowed to the repositories and
// permissions the body asks for (tokenscope.go).
// https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app
func (s *Server) handleCreateAccessToken(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	in := s.st.Installations[id]
	if in == nil {
		writeErr(w, errNotFound)
		return
	}
	req, err := decodeTokenRequest(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	repos, perms, herr := s.scopeLocked(in, req)
	if herr != nil {
		writeErr(w, herr)
		return
	}
	tok := s.mintTokenLocked(id)
	tok.Repos, tok.Permissions = repos, perms
	out := &github.InstallationToken{
		Token:       github.String(tok.Token),
		ExpiresAt:   &github.Timestamp{Time: s.clock.toWall(tok.ExpiresAt).UTC().Truncate(time.Second)},
		Permissions: installationPermissions(s.tokenPermissions(principal{perms: perms})),
	}
	full := asMap(out)
	full["repository_selection"] = "all"
	if repos != nil {
		list := []map[string]any{}
		for _, k := range repos {
			list = append(list, s.fullRepoJSON(s.st.Repos[k]))
		}
		full["repository_selection"], full["repositories"] = "selected", list
	}
	writeJSON(w, http.StatusCreated, full)
}

// grantedPermissions are the App's permissions: its manifest's, or (without one) those the
// fake's App has always shown.
func (s *Server) grantedPermissions() map[string]string {
	if s.cfg.appPerms != nil {
		return s.cfg.appPerms
	}
	return map[string]string{
		"administration": "write", "contents": "write", "pull_requests": "write", "issues": "write",
		"checks": "write", "statuses": "write", "members": "read", "metadata": "read",
	}
}

// appEvents are the events the App subscribes to: its manifest's, or the ones the fake sends.
func (s *Server) appEvents() []string {
	if s.cfg.appEvents != nil {
		return s.cfg.appEvents
	}
	return []string{"push", "pull_request", "installation", "status", "check_run"}
}

func (s *Server) mintTokenLocked(installationID int64) *accessToken {
	var b [20]byte
	_, _ = rand.Read(b[:])
	tok := &accessToken{
		Token:          "ghs_" + hex.EncodeToString(b[:]),
		Login:          s.botLogin(),
		InstallationID: installationID,
		ExpiresAt:      s.clock.Now().Add(s.cfg.tokenLifetime),
	}
	s.st.Tokens[tok.Token] = tok
	return tok
}

func (s *Server) handleInstallationRepos(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	in := s.st.Installations[p.installationID]
	if in == nil {
		writeErr(w, errorf(http.StatusForbidden, "This endpoint requires an installation token"))
		return
	}
	var repos []*repoMeta
	for _, k := range slices.Sorted(maps.Keys(s.st.Repos)) {
		if rm := s.st.Repos[k]; strings.EqualFold(rm.Owner, in.Account) && p.inScope(rm) {
			repos = append(repos, rm)
		}
	}
	page, link := paginate(r, repos)
	if link != "" {
		w.Header().Set("Link", link)
	}
	out := make([]map[string]any, 0, len(page))
	for _, rm := range page {
		out = append(out, s.fullRepoJSON(rm))
	}
	selection := "all"
	if p.repos != nil {
		selection = "selected" // a token narrowed to some repositories
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(repos), "repositories": out, "repository_selection": selection})
}

func (s *Server) handleRateLimit(w http.ResponseWriter, r *http.Request) {
	ri := s.rate(principalOf(r).bucket)
	reset := s.clock.toWall(ri.reset).Add(time.Second - 1).Unix()
	core := map[string]any{"limit": ri.limit, "remaining": ri.remaining, "used": ri.used, "reset": reset, "resource": "core"}
	other := func(name string, limit int) map[string]any {
		return map[string]any{"limit": limit, "remaining": limit, "used": 0, "reset": reset, "resource": name}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"resources": map[string]any{"core": core, "search": other("search", 30), "graphql": s.graphQLBudget(principalOf(r).bucket)},
		"rate":      core,
	})
}
