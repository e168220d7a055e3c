// Package kubernetes holds the node-agent manifests (a kustomize base) and
// the test that keeps them honest: every object decodes strictly into the
// Kubernetes API types, and the invariants the design relies on hold.
package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// kustomization is the subset of kustomize's Kustomization this base uses;
// decoding it strictly catches a misspelt field.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
	Labels []struct {
		Pairs            map[string]string `json:"pairs"`
		IncludeSelectors bool              `json:"includeSelectors"`
	} `json:"labels"`
}

// strict decodes YAML into v, failing on unknown or duplicate fields.
func strict(data []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// objects decodes every manifest the kustomization lists into its API type.
func objects(t *testing.T) (kustomization, map[string]any) {
	t.Helper()
	var k kustomization
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := strict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("kustomization.yaml is %s %s", k.APIVersion, k.Kind)
	}
	files, _ := filepath.Glob("*.yaml")
	listed := append([]string{"kustomization.yaml"}, k.Resources...)
	for _, f := range files {
		if !slices.Contains(listed, f) {
			t.Errorf("%s is not in kustomization.yaml's resources", f)
		}
	}
	objs := map[string]any{}
	for _, f := range k.Resources {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(data, &head); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var obj any
		switch head.APIVersion + " " + head.Kind {
		case "v1 Namespace":
			obj = &corev1.Namespace{}
		case "v1 ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "v1 ConfigMap":
			obj = &corev1.ConfigMap{}
		case "v1 Secret":
			obj = &corev1.Secret{}
		case "v1 Service":
			obj = &corev1.Service{}
		case "apps/v1 DaemonSet":
			obj = &appsv1.DaemonSet{}
		case "policy/v1 PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		case "networking.k8s.io/v1 NetworkPolicy":
			obj = &networkingv1.NetworkPolicy{}
		default:
			t.Fatalf("%s: no API type for %s %s", f, head.APIVersion, head.Kind)
		}
		if err := strict(data, obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		objs[head.Kind] = obj
	}
	return k, objs
}

func TestManifestsDecodeStrictly(t *testing.T) {
	_, objs := objects(t)
	for _, kind := range []string{"Namespace", "ServiceAccount", "ConfigMap", "Secret", "Service", "DaemonSet", "PodDisruptionBudget", "NetworkPolicy"} {
		if objs[kind] == nil {
			t.Errorf("no %s", kind)
		}
	}
}

// TestAgentInvariants holds the DaemonSet to what docs/scale-out.md and
// SECURITY.md promise of it.
func TestAgentInvariants(t *testing.T) {
	k, objs := objects(t)
	ds := objs["DaemonSet"].(*appsv1.DaemonSet)
	pod := ds.Spec.Template.Spec

	// The only host paths: the containerd socket and the run folder.
	var hostPaths []string
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths = append(hostPaths, v.HostPath.Path)
		}
	}
	slices.Sort(hostPaths)
	if want := []string{"/run/containerd/containerd.sock", "/run/dsh-container"}; !slices.Equal(hostPaths, want) {
		t.Errorf("host paths %q, want exactly %q", hostPaths, want)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Error("the agent shares a host namespace")
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("a service account token is mounted")
	}

	secretVolume := ""
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			secretVolume = v.Name
		}
	}
	if secretVolume == "" {
		t.Fatal("no Secret volume")
	}
	containers := append(slices.Clone(pod.InitContainers), pod.Containers...)
	var agent *corev1.Container
	for i, c := range containers {
		if c.Name == "agent" {
			agent = &containers[i]
		}
		sc := c.SecurityContext
		if sc == nil || sc.Privileged == nil || *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
			t.Errorf("container %s: securityContext is not the minimal one (unprivileged, no escalation, read-only root, every capability dropped): %+v", c.Name, sc)
		}
		for _, m := range c.VolumeMounts {
			if m.Name == secretVolume && !m.ReadOnly {
				t.Errorf("container %s mounts the Secret read-write", c.Name)
			}
		}
	}
	if agent == nil {
		t.Fatal("no agent container")
	}
	for name, p := range map[string]*corev1.Probe{"readiness": agent.ReadinessProbe, "liveness": agent.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
			t.Errorf("%s probe does not GET /healthz: %+v", name, p)
		}
	}
	args := strings.Join(agent.Args, " ")
	for _, want := range []string{"serve", "--driver=containerd", "--runtime=runsc", "--auth=", "--containerd-address=/run/containerd/containerd.sock"} {
		if !strings.Contains(args, want) {
			t.Errorf("agent args %q lack %s", args, want)
		}
	}
	if strings.Contains(args, "--insecure-no-auth") {
		t.Error("the agent listens without authentication")
	}

	// The NetworkPolicy selects the agents and limits their ingress.
	np := objs["NetworkPolicy"].(*networkingv1.NetworkPolicy)
	if fmt.Sprint(np.Spec.PodSelector.MatchLabels) != fmt.Sprint(ds.Spec.Selector.MatchLabels) || len(np.Spec.Ingress) == 0 || len(np.Spec.Ingress[0].From) == 0 {
		t.Errorf("NetworkPolicy does not limit the agents' ingress: %+v", np.Spec)
	}
	pdb := objs["PodDisruptionBudget"].(*policyv1.PodDisruptionBudget)
	if fmt.Sprint(pdb.Spec.Selector.MatchLabels) != fmt.Sprint(ds.Spec.Selector.MatchLabels) {
		t.Error("PodDisruptionBudget does not select the agents")
	}
	svc := objs["Service"].(*corev1.Service)
	if fmt.Sprint(svc.Spec.Selector) != fmt.Sprint(ds.Spec.Selector.MatchLabels) {
		t.Error("Service does not select the agents")
	}
	// Every namespaced object is in the kustomization's namespace.
	if ds.Namespace != k.Namespace || svc.Namespace != k.Namespace {
		t.Errorf("objects outside namespace %s", k.Namespace)
	}
	// The example tenant file parses as serve --auth reads it.
	sec := objs["Secret"].(*corev1.Secret)
	var auth struct {
		Tenants []struct {
			Name        string `json:"name"`
			TokenSha256 string `json:"tokenSha256"`
			MaxRuns     int    `json:"maxRuns"`
			Queue       int    `json:"queue"`
		} `json:"tenants"`
	}
	dec := json.NewDecoder(strings.NewReader(sec.StringData["auth.json"]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&auth); err != nil || len(auth.Tenants) == 0 || len(auth.Tenants[0].TokenSha256) != 64 {
		t.Errorf("auth.json in the Secret is not a tenants file: %v %+v", err, auth)
	}
}
