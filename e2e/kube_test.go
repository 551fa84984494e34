package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// pki is the files of the cluster's certificate authority, the API
// server's serving certificate, an admin client certificate (group
// system:masters) and the ServiceAccount token signing key pair.
type pki struct {
	caCert, serverCert, serverKey, adminCert, adminKey, saKey, saPub string
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{
		caCert: filepath.Join(dir, "ca.crt"), serverCert: filepath.Join(dir, "apiserver.crt"), serverKey: filepath.Join(dir, "apiserver.key"),
		adminCert: filepath.Join(dir, "admin.crt"), adminKey: filepath.Join(dir, "admin.key"),
		saKey: filepath.Join(dir, "sa.key"), saPub: filepath.Join(dir, "sa.pub"),
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fleetbot-e2e-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.caCert, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	issue := func(serial int64, subject pkix.Name, usage x509.ExtKeyUsage, ips []net.IP, dns []string, certFile, keyFile string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: subject,
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: ips, DNSNames: dns,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(keyFile, "EC PRIVATE KEY", keyDER)
	}
	if err := issue(2, pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}, []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		p.serverCert, p.serverKey); err != nil {
		return nil, err
	}
	if err := issue(3, pkix.Name{CommonName: "fleetbot-e2e-admin", Organization: []string{"system:masters"}}, x509.ExtKeyUsageClientAuth,
		nil, nil, p.adminCert, p.adminKey); err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.saKey, "EC PRIVATE KEY", saDER); err != nil {
		return nil, err
	}
	return p, writePEM(p.saPub, "PUBLIC KEY", pubDER)
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}

func writeKubeconfig(path, server string, p *pki) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: %q, certificate-authority: %q}
users:
- name: admin
  user: {client-certificate: %q, client-key: %q}
contexts:
- name: e2e
  context: {cluster: e2e, user: admin}
current-context: e2e
`, server, p.caCert, p.adminCert, p.adminKey)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// plainGet reads an http:// URL on 127.0.0.1 (etcd health, Flux storage).
func plainGet(url string) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b), err
}

// kubeClient talks to the API server as the admin, over REST: applying
// manifests with server-side apply and reading objects as JSON maps.
// Resource names come from discovery, so CRDs work once served.
type kubeClient struct {
	base string
	http *http.Client

	mu        sync.Mutex
	discovery map[string]map[string]apiResource // group/version -> kind -> resource
}

type apiResource struct {
	Name       string `json:"name"`
	Kind       string `json:"kind"`
	Namespaced bool   `json:"namespaced"`
}

func newKubeClient(base string, p *pki) (*kubeClient, error) {
	caPEM, err := os.ReadFile(p.caCert)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(p.adminCert, p.adminKey)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	return &kubeClient{base: base, http: &http.Client{Transport: tr, Timeout: 30 * time.Second}, discovery: map[string]map[string]apiResource{}}, nil
}

// raw sends one request; headers may carry impersonation.
func (k *kubeClient) raw(ctx context.Context, method, path string, body []byte, contentType string, headers map[string]string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, k.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	for h, v := range headers {
		req.Header.Set(h, v)
	}
	resp, err := k.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, b, err
}

func (k *kubeClient) forgetDiscovery() {
	k.mu.Lock()
	k.discovery = map[string]map[string]apiResource{}
	k.mu.Unlock()
}

// resourceFor finds the REST resource of kind in apiVersion.
func (k *kubeClient) resourceFor(ctx context.Context, apiVersion, kind string) (apiResource, error) {
	k.mu.Lock()
	kinds, ok := k.discovery[apiVersion]
	k.mu.Unlock()
	if !ok {
		path := "/apis/" + apiVersion
		if apiVersion == "v1" {
			path = "/api/v1"
		}
		code, body, err := k.raw(ctx, "GET", path, nil, "", nil)
		if err != nil {
			return apiResource{}, err
		}
		if code != http.StatusOK {
			return apiResource{}, fmt.Errorf("discovery of %s: HTTP %d", apiVersion, code)
		}
		var list struct {
			Resources []apiResource `json:"resources"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			return apiResource{}, err
		}
		kinds = map[string]apiResource{}
		for _, r := range list.Resources {
			if !strings.Contains(r.Name, "/") {
				kinds[r.Kind] = r
			}
		}
		k.mu.Lock()
		k.discovery[apiVersion] = kinds
		k.mu.Unlock()
	}
	r, ok := kinds[kind]
	if !ok {
		return apiResource{}, fmt.Errorf("the API server serves no %s in %s", kind, apiVersion)
	}
	return r, nil
}

// objectPath is the REST path of one object (name "" for the collection).
func (k *kubeClient) objectPath(ctx context.Context, apiVersion, kind, namespace, name string) (string, error) {
	r, err := k.resourceFor(ctx, apiVersion, kind)
	if err != nil {
		return "", err
	}
	p := "/apis/" + apiVersion
	if apiVersion == "v1" {
		p = "/api/v1"
	}
	if r.Namespaced {
		if namespace == "" {
			return "", fmt.Errorf("%s %s is namespaced: give a namespace", kind, name)
		}
		p += "/namespaces/" + namespace
	}
	p += "/" + r.Name
	if name != "" {
		p += "/" + name
	}
	return p, nil
}

// get returns one object, or nil when it does not exist.
func (k *kubeClient) get(ctx context.Context, apiVersion, kind, namespace, name string) (map[string]any, error) {
	p, err := k.objectPath(ctx, apiVersion, kind, namespace, name)
	if err != nil {
		return nil, err
	}
	code, body, err := k.raw(ctx, "GET", p, nil, "", nil)
	if err != nil {
		return nil, err
	}
	if code == http.StatusNotFound {
		return nil, nil
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d: %s", p, code, body)
	}
	var obj map[string]any
	return obj, json.Unmarshal(body, &obj)
}

// apply server-side applies one object (JSON) as field manager
// fleetbot-e2e, the way kubectl apply --server-side does.
func (k *kubeClient) apply(ctx context.Context, obj map[string]any, headers map[string]string) error {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	md, _ := obj["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	r, err := k.resourceFor(ctx, apiVersion, kind)
	if err != nil {
		return err
	}
	if r.Namespaced && ns == "" {
		ns = "default"
	}
	p, err := k.objectPath(ctx, apiVersion, kind, ns, name)
	if err != nil {
		return err
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	code, resp, err := k.raw(ctx, "PATCH", p+"?fieldManager=fleetbot-e2e&force=true", body, "application/apply-patch+yaml", headers)
	if err != nil {
		return err
	}
	if code >= 300 {
		return &statusError{code: code, body: string(resp), what: kind + "/" + name}
	}
	return nil
}

// statusError is a refused request, with the API server's Status body.
type statusError struct {
	code int
	body string
	what string
}

func (e *statusError) Error() string { return fmt.Sprintf("%s: HTTP %d: %s", e.what, e.code, e.body) }

// applyYAML applies every document of a multi-document YAML; namespace,
// when set, fills in namespaced objects that name none.
func (k *kubeClient) applyYAML(ctx context.Context, data []byte, namespace string) error {
	docs, err := splitYAML(data)
	if err != nil {
		return err
	}
	for _, obj := range docs {
		if namespace != "" {
			md, _ := obj["metadata"].(map[string]any)
			if _, ok := md["namespace"]; !ok {
				md["namespace"] = namespace
			}
		}
		if err := k.apply(ctx, obj, nil); err != nil {
			return err
		}
	}
	return nil
}

// splitYAML decodes the non-empty documents of a multi-document YAML.
func splitYAML(data []byte) ([]map[string]any, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var out []map[string]any
	for {
		var node yamlv3.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		doc, err := yamlv3.Marshal(&node)
		if err != nil {
			return nil, err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, err
		}
		if len(obj) > 0 {
			out = append(out, obj)
		}
	}
}

// field walks nested maps: field(obj, "status", "artifact", "revision").
func field(obj map[string]any, path ...string) any {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

// condition returns the status, reason and message of a status condition.
func condition(obj map[string]any, typ string) (status, reason, message string) {
	conds, _ := field(obj, "status", "conditions").([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return s, r, msg
		}
	}
	return "", "", ""
}
