package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	containerdclient "github.com/containerd/containerd"
	"github.com/containerd/containerd/images"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/errdefs"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/dsh-container/dsh-container/backend/container/containerd"
	"github.com/dsh-container/dsh-container/client"
	"github.com/dsh-container/dsh-container/internal/testenv"
)

// AgentImage is the node agent's image, as deploy/kubernetes names it;
// `make agent-image` builds it.
const AgentImage = "dsh-container/agent"

// The Kubernetes node agent, as deploy/kubernetes/daemonset.yaml runs it,
// on this host's containerd: its init container builds the runner images
// from the root filesystem the agent image carries (no registry, no
// Docker), then the agent serves, authenticated, and runs programs of both
// languages under gVisor (its --runtime=runsc) calling a tool from its
// tools file; SIGTERM leaves nothing in its namespace. Each container gets
// the manifest's own arguments, security context (read-only root, no
// capability, no escalation, root) and mounts (the containerd socket and
// the run folder at the node's paths); only the namespace, the pool size
// and the files behind the ConfigMap and Secret are the test's.
//
//	go test -count=1 -run TestKubernetesAgent -v ./e2e/
func TestKubernetesAgent(t *testing.T) {
	testenv.UsesDaemon(t)
	ctx := context.Background()
	if _, err := cli.ImageInspect(ctx, AgentImage+":latest"); err != nil {
		testenv.Missing(t, "the agent image %s: %v (make agent-image builds it)", AgentImage, err)
	}
	// containerd's address (the images in its own namespace are not
	// needed: the init container builds them).
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	drv, err := containerd.New(cctx, containerd.Options{})
	cancel()
	if err != nil {
		testenv.Missing(t, "containerd: %v", err)
	}
	addr := drv.Address()
	drv.Close()
	var ds appsv1.DaemonSet
	data, err := os.ReadFile(filepath.Join("..", "deploy", "kubernetes", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &ds); err != nil {
		t.Fatal(err)
	}
	pod := ds.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || len(pod.Containers) != 1 {
		t.Fatalf("want one init container and one container, have %d and %d", len(pod.InitContainers), len(pod.Containers))
	}
	initC, agentC := pod.InitContainers[0], pod.Containers[0]
	for _, c := range []corev1.Container{initC, agentC} {
		if c.Image != AgentImage {
			t.Fatalf("container %s runs %q, want %s (the image with the base root filesystem)", c.Name, c.Image, AgentImage)
		}
	}

	var b [6]byte
	rand.Read(b[:])
	ns := "dsh-agent-" + hex.EncodeToString(b[:])
	ccli, err := containerdclient.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	nctx := namespaces.WithNamespace(ctx, ns)
	// The namespace goes at the end, with its images, their content and
	// snapshots (a synchronous delete runs containerd's collector).
	t.Cleanup(func() {
		defer ccli.Close()
		imgs, err := ccli.ImageService().List(nctx)
		if err != nil {
			t.Errorf("listing namespace %s's images: %v", ns, err)
		}
		for _, im := range imgs {
			if err := ccli.ImageService().Delete(nctx, im.Name, images.SynchronousDelete()); err != nil {
				t.Errorf("deleting %s: %v", im.Name, err)
			}
		}
		if err := ccli.NamespaceService().Delete(ctx, ns); err != nil && !errdefs.IsNotFound(err) {
			t.Errorf("namespace %s is left: %v", ns, err)
		}
	})

	// The Pod's volumes: the node's containerd socket and run folder at
	// the same paths; the ConfigMap and Secret as files.
	const runDir = "/run/dsh-container"
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		t.Fatal(err)
	}
	etc := t.TempDir()
	token := hex.EncodeToString(b[:]) + "-token"
	sum := sha256.Sum256([]byte(token))
	os.MkdirAll(filepath.Join(etc, "auth"), 0o755)
	os.MkdirAll(filepath.Join(etc, "tools"), 0o755)
	os.WriteFile(filepath.Join(etc, "auth", "auth.json"), []byte(fmt.Sprintf(`{"tenants":[{"name":"agent-test","tokenSha256":%q}]}`, hex.EncodeToString(sum[:]))), 0o644)
	os.WriteFile(filepath.Join(etc, "tools", "tools.json"), []byte(`{"tools":[{"name":"shout","description":"Upper-case the text.",
		"inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},
		"command":["/bin/sh","-c","tr a-z A-Z"]}]}`), 0o644)
	podArgs := func(c corev1.Container) []string {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || sc.RunAsUser == nil {
			t.Fatalf("container %s: securityContext %+v is not the minimal one this test translates", c.Name, sc)
		}
		args := []string{"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", fmt.Sprintf("%d:%d", *sc.RunAsUser, *sc.RunAsUser),
			"--hostname", pod.Hostname, "--tmpfs", "/tmp",
			"-v", addr + ":/run/containerd/containerd.sock", "-v", runDir + ":" + runDir,
			"-v", filepath.Join(etc, "auth") + ":/etc/dsh-container/auth:ro", "-v", filepath.Join(etc, "tools") + ":/etc/dsh-container/tools:ro"}
		for _, e := range c.Env {
			args = append(args, "-e", e.Name+"="+e.Value)
		}
		return args
	}

	// The init container: the runner images, into the namespace.
	start := time.Now()
	run := append(append([]string{"run", "--rm"}, podArgs(initC)...), AgentImage)
	run = append(append(run, initC.Args...), "--containerd-namespace="+ns)
	out, err := exec.Command("docker", run...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ts-runner ready") || !strings.Contains(string(out), "py-runner ready") {
		t.Fatalf("the init container (docker %s): %v\n%s", strings.Join(run, " "), err, out)
	}
	t.Logf("AGENT init container built the runner images in %v:\n%s", time.Since(start).Round(time.Millisecond), out)

	// The agent.
	name := "dsh-agent-test-" + hex.EncodeToString(b[:])
	run = append(append([]string{"run", "-d", "--name", name, "-p", "127.0.0.1::8443"}, podArgs(agentC)...), AgentImage)
	run = append(append(run, agentC.Args...), "--containerd-namespace="+ns, "--pool=1", "--max-runs=2")
	if out, err := exec.Command("docker", run...).CombinedOutput(); err != nil {
		t.Fatalf("starting the agent (docker %s): %v\n%s", strings.Join(run, " "), err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
			t.Logf("the agent's log:\n%s", logs)
		}
		exec.Command("docker", "rm", "-f", name).Run()
	})
	port, err := exec.Command("docker", "port", name, "8443/tcp").Output()
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + strings.TrimSpace(strings.Split(string(port), "\n")[0])
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
		resp, err := http.Get(url + agentC.ReadinessProbe.HTTPGet.Path)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent never became ready on %s%s: %v", url, agentC.ReadinessProbe.HTTPGet.Path, err)
		}
	}
	if resp, err := http.Post(url+"/v1/run", "application/json", strings.NewReader(`{"language":"python","code":"return 1"}`)); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a run without a token: %v %v, want 401", resp, err)
	}

	c := &client.Client{URL: url, Token: token}
	for lang, code := range map[string]string{
		"python":     "import os\nr = await tools.shout({\"text\": \"hi\"})\nreturn [r, os.path.exists('/proc/sentry-meminfo')]",
		"typescript": `const r = await tools.shout({text: "hi"}); return [r, "gVisor: see python"]`,
	} {
		rep, err := c.Run(ctx, client.Request{Language: lang, Code: code}, nil, client.Handlers{})
		if err != nil || rep.Error != nil {
			t.Fatalf("%s on the agent: %+v %v", lang, rep, err)
		}
		var v []any
		json.Unmarshal(rep.Value, &v)
		if len(v) != 2 || v[0] != `{"TEXT":"HI"}` || (lang == "python" && v[1] != true) {
			t.Errorf("%s on the agent: %s, want the tool's answer (and, in Python, /proc/sentry-meminfo: gVisor)", lang, rep.Value)
		}
		t.Logf("AGENT %s: %s", lang, rep.Value)
	}

	// SIGTERM (as the kubelet sends it): exit 0, nothing left in the
	// namespace.
	if out, err := exec.Command("docker", "stop", "-t", fmt.Sprint(*pod.TerminationGracePeriodSeconds), name).CombinedOutput(); err != nil {
		t.Fatalf("docker stop: %v %s", err, out)
	}
	if code, _ := exec.Command("docker", "inspect", "-f", "{{.State.ExitCode}}", name).Output(); strings.TrimSpace(string(code)) != "0" {
		t.Errorf("the agent exited %s after SIGTERM, want 0", bytes.TrimSpace(code))
	}
	left, err := ccli.Containers(nctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("%d containers left in namespace %s after the agent stopped", len(left), ns)
	}
}
