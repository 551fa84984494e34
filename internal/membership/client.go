package membership

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// NewClient returns a client of the API server: from the kubeconfig file when one is named
// (a replica outside the cluster, the end-to-end tests), else the pod's service account
// (in-cluster: KUBERNETES_SERVICE_HOST and the mounted token).
func NewClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		if kubeconfig == "" {
			return nil, fmt.Errorf("replicas on Leases need the Kubernetes API: not in a pod with a service account token (automountServiceAccountToken: true), and no KUBECONFIG: %w", err)
		}
		return nil, fmt.Errorf("replicas on Leases: kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.UserAgent = "fleetbot"
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("replicas on Leases: Kubernetes client: %w", err)
	}
	return c, nil
}
