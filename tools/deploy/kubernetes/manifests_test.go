package kubernetes_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/vnic/vnic/tools/internal/image"
)

// kustomization is the part of kustomize's Kustomization this base uses;
// decoding it strictly refuses any other field, so a field added here must
// be added to the struct too.
type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Labels     []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
	Resources []string `json:"resources"`
	Images    []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images"`
}

// manifests decodes every resource of the kustomization strictly.
type manifests struct {
	ns        *corev1.Namespace
	sa        *corev1.ServiceAccount
	cm        *corev1.ConfigMap
	ds        *appsv1.DaemonSet
	app       *appsv1.Deployment
	namespace string
}

// repoRoot is the repository's root, seen from this package's directory in
// the tools module; manifestDir holds the manifests, which stay where
// kubectl apply -k deploy/kubernetes finds them.
const repoRoot = "../../.."

var manifestDir = filepath.Join(repoRoot, "deploy", "kubernetes")

func load(t *testing.T) manifests {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(manifestDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(raw, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("kustomization.yaml is %s %s", k.APIVersion, k.Kind)
	}
	onDisk, _ := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	for i, f := range onDisk {
		onDisk[i] = filepath.Base(f)
	}
	onDisk = slices.DeleteFunc(onDisk, func(s string) bool { return s == "kustomization.yaml" })
	listed := slices.Clone(k.Resources)
	sort.Strings(onDisk)
	sort.Strings(listed)
	if !slices.Equal(onDisk, listed) {
		t.Fatalf("kustomization.yaml lists %v but the directory holds %v", listed, onDisk)
	}
	m := manifests{namespace: k.Namespace}
	for _, file := range k.Resources {
		raw, err := os.ReadFile(filepath.Join(manifestDir, file))
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s document %d: %v", file, i, err)
			}
			var into any
			switch meta.APIVersion + " " + meta.Kind {
			case "v1 Namespace":
				m.ns = new(corev1.Namespace)
				into = m.ns
			case "v1 ServiceAccount":
				m.sa = new(corev1.ServiceAccount)
				into = m.sa
			case "v1 ConfigMap":
				m.cm = new(corev1.ConfigMap)
				into = m.cm
			case "apps/v1 DaemonSet":
				m.ds = new(appsv1.DaemonSet)
				into = m.ds
			case "apps/v1 Deployment":
				m.app = new(appsv1.Deployment)
				into = m.app
			default:
				t.Fatalf("%s document %d: unexpected %s %s; teach this test its type", file, i, meta.APIVersion, meta.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, into); err != nil {
				t.Fatalf("%s document %d (%s): %v", file, i, meta.Kind, err)
			}
		}
	}
	if m.ns == nil || m.sa == nil || m.cm == nil || m.ds == nil || m.app == nil {
		t.Fatalf("missing a manifest: namespace %v, service account %v, configmap %v, daemonset %v, app %v", m.ns != nil, m.sa != nil, m.cm != nil, m.ds != nil, m.app != nil)
	}
	if m.ns.Name != k.Namespace {
		t.Errorf("namespace.yaml creates %q, kustomization.yaml puts resources in %q", m.ns.Name, k.Namespace)
	}
	return m
}

// TestStrictDecoding catches misspelt fields: sigs.k8s.io/yaml's strict
// mode must refuse them, or the test above proves nothing.
func TestStrictDecoding(t *testing.T) {
	load(t)
	bad := []byte("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      hostNetwrok: true\n")
	if err := yaml.UnmarshalStrict(bad, new(appsv1.DaemonSet)); err == nil {
		t.Fatal("a misspelt field (hostNetwrok) decoded without an error")
	}
}

// unitCaps reads the capabilities of the systemd unit, the one source of
// truth for vnicd's privileges.
func unitCaps(t *testing.T) (bounding, ambient []string) {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "contrib", "systemd", "vnicd.service"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		var caps []string
		for _, c := range strings.Fields(v) {
			caps = append(caps, strings.TrimPrefix(c, "CAP_"))
		}
		sort.Strings(caps)
		switch k {
		case "CapabilityBoundingSet":
			bounding = caps
		case "AmbientCapabilities":
			ambient = caps
		}
	}
	if len(bounding) == 0 {
		t.Fatal("contrib/systemd/vnicd.service has no CapabilityBoundingSet")
	}
	return bounding, ambient
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

func TestDaemonSet(t *testing.T) {
	m := load(t)
	spec := m.ds.Spec.Template.Spec
	if !spec.HostNetwork {
		t.Error("vnicd must run on the host network: it attaches XDP to a host NIC")
	}
	c := container(t, spec, "vnicd")

	bounding, ambient := unitCaps(t)
	if !slices.Equal(bounding, ambient) {
		t.Errorf("the systemd unit's bounding set %v and ambient set %v differ", bounding, ambient)
	}
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatal("the vnicd container has no capabilities")
	}
	var add []string
	for _, a := range sc.Capabilities.Add {
		add = append(add, string(a))
	}
	sort.Strings(add)
	if !slices.Equal(add, bounding) {
		t.Errorf("DaemonSet adds capabilities %v, the systemd unit grants %v: change both together", add, bounding)
	}
	if len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("DaemonSet drops %v, want [ALL]", sc.Capabilities.Drop)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("vnicd must not be privileged: the capability set is enough")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation must be false")
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Error("vnicd must run as uid 0 for its added capabilities to be effective")
	}

	guaranteed(t, "vnicd", c)

	// Tenant regions are charged to vnicd's memory cgroup: the budget must
	// fit under the limit with room for vnicd itself.
	budget, err := resource.ParseQuantity(strings.Replace(configValue(t, m.cm, "memory-budget"), "iB", "i", 1))
	if err != nil {
		t.Fatalf("ConfigMap memory-budget: %v", err)
	}
	limit := c.Resources.Limits[corev1.ResourceMemory]
	if budget.Value()+128<<20 > limit.Value() {
		t.Errorf("memory-budget %s leaves less than 128 MiB of the %s memory limit for vnicd itself", budget.String(), limit.String())
	}

	// /run/vnic from the host, shared with application pods.
	var hostRun, cmMount bool
	for _, v := range spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path == "/run/vnic" {
			for _, vm := range c.VolumeMounts {
				hostRun = hostRun || (vm.Name == v.Name && vm.MountPath == "/run/vnic")
			}
		}
		if v.ConfigMap != nil && v.ConfigMap.Name == m.cm.Name {
			for _, vm := range c.VolumeMounts {
				cmMount = cmMount || (vm.Name == v.Name && vm.MountPath == "/etc/vnicd")
			}
		}
	}
	if !hostRun || !cmMount {
		t.Errorf("vnicd mounts hostPath /run/vnic: %v, the ConfigMap at /etc/vnicd: %v", hostRun, cmMount)
	}

	sock := configValue(t, m.cm, "socket")
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.Exec == nil {
			t.Errorf("no %s probe with exec", name)
			continue
		}
		want := []string{"/usr/local/bin/vnicctl", "--socket", sock, "status"}
		if !slices.Equal(p.Exec.Command, want) {
			t.Errorf("%s probe runs %v, want %v (the ConfigMap's socket)", name, p.Exec.Command, want)
		}
	}
	if len(c.Command) != 1 || c.Command[0] != image.BinDir+"/vnicd" {
		t.Errorf("command %v, want the image's vnicd", c.Command)
	}
}

// guaranteed checks Guaranteed QoS with whole CPUs (what the static CPU
// manager needs to give exclusive cores).
func guaranteed(t *testing.T, name string, c corev1.Container) {
	t.Helper()
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okr := c.Resources.Requests[r]
		lim, okl := c.Resources.Limits[r]
		if !okr || !okl || req.Cmp(lim) != 0 {
			t.Errorf("%s: %s request %v and limit %v must be set and equal (Guaranteed QoS)", name, r, req.String(), lim.String())
		}
	}
	cpu := c.Resources.Limits[corev1.ResourceCPU]
	if cpu.MilliValue()%1000 != 0 || cpu.MilliValue() == 0 {
		t.Errorf("%s: CPU %s is not a whole number of cores; the static CPU manager gives exclusive cores only for integers", name, cpu.String())
	}
}

func configValue(t *testing.T, cm *corev1.ConfigMap, key string) string {
	t.Helper()
	var flags map[string]any
	if err := yaml.UnmarshalStrict([]byte(cm.Data["vnicd.yaml"]), &flags); err != nil {
		t.Fatalf("ConfigMap vnicd.yaml: %v", err)
	}
	v, ok := flags[key]
	if !ok {
		t.Fatalf("ConfigMap vnicd.yaml has no %q", key)
	}
	return fmt.Sprint(v)
}

// TestConfigPassesVnicdCheck runs vnicd's own flag validation on the
// ConfigMap with the DaemonSet's arguments, and checks that it refuses a
// broken copy (so a pass means something).
func TestConfigPassesVnicdCheck(t *testing.T) {
	m := load(t)
	dir := t.TempDir()
	vnicd := filepath.Join(dir, "vnicd")
	build := exec.Command("go", "build", "-o", vnicd, "./cmd/vnicd")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build vnicd: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "vnicd.yaml")
	if err := os.WriteFile(cfg, []byte(m.cm.Data["vnicd.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	c := container(t, m.ds.Spec.Template.Spec, "vnicd")
	var args []string
	for _, a := range c.Args {
		// Kubernetes expands $(NODE_IP) from the env; any address will do.
		a = strings.ReplaceAll(a, "$(NODE_IP)", "198.18.0.1")
		if strings.HasPrefix(a, "--config=") {
			if got := strings.TrimPrefix(a, "--config="); got != "/etc/vnicd/vnicd.yaml" {
				t.Errorf("--config %s is not where the ConfigMap is mounted", got)
			}
			a = "--config=" + cfg
		}
		args = append(args, a)
	}
	for _, env := range c.Env {
		if !strings.Contains(strings.Join(c.Args, " "), "$("+env.Name+")") {
			t.Errorf("env %s is not used by the arguments", env.Name)
		}
	}
	if len(args) == 0 || args[0] != "run" {
		t.Fatalf("DaemonSet args %v do not start with run", c.Args)
	}
	check := func(args []string) ([]byte, error) {
		return exec.Command(vnicd, append(slices.Clone(args), "--check")...).CombinedOutput()
	}
	if out, err := check(args); err != nil {
		t.Fatalf("vnicd %s --check refuses the ConfigMap: %v\n%s", strings.Join(args, " "), err, out)
	}
	bad := filepath.Join(dir, "bad.yaml")
	for _, extra := range []string{"ax_size: 128\n", "model: bogus\n", "idle: sometimes\n", "ax-size: 100\n", "memory-budget: lots\n"} {
		// yaml keys must be unique: drop a key the extra line sets.
		lines := strings.Split(m.cm.Data["vnicd.yaml"], "\n")
		key, _, _ := strings.Cut(extra, ":")
		lines = slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, key+":") })
		if err := os.WriteFile(bad, []byte(strings.Join(lines, "\n")+extra), 0o644); err != nil {
			t.Fatal(err)
		}
		badArgs := slices.Clone(args)
		for i, a := range badArgs {
			if strings.HasPrefix(a, "--config=") {
				badArgs[i] = "--config=" + bad
			}
		}
		if out, err := check(badArgs); err == nil {
			t.Errorf("vnicd --check accepted a ConfigMap with %q:\n%s", extra, out)
		}
	}
}

func TestExampleApp(t *testing.T) {
	m := load(t)
	spec := m.app.Spec.Template.Spec
	if spec.HostNetwork {
		t.Error("the application must not need the host network")
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Fatal("the application must run as a non-root user")
	}
	if !slices.Contains(psc.SupplementalGroups, image.VnicGID) {
		t.Errorf("supplemental groups %v lack the vnic group %d that owns the socket", psc.SupplementalGroups, image.VnicGID)
	}
	if g := configValue(t, m.cm, "socket-group"); g != "vnic" {
		t.Errorf("vnicd's socket group is %q; the image's /etc/group defines vnic as %d", g, image.VnicGID)
	}
	c := container(t, spec, "rxcount")
	if sc := c.SecurityContext; sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Add) > 0 || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("the application must drop every capability and not escalate")
	}
	// vnicd claims only what tenants' rules ask for: the application must
	// name its ports, and it re-attaches across a vnicd rollout.
	if !slices.Contains(c.Args, "--ports") || !slices.Contains(c.Args, "--reattach") {
		t.Errorf("the application's args %v lack --ports (a claim) or --reattach", c.Args)
	}
	sock := configValue(t, m.cm, "socket")
	if !slices.Contains(c.Args, sock) {
		t.Errorf("the application's args %v do not name vnicd's socket %s", c.Args, sock)
	}
	var mounted bool
	for _, vm := range c.VolumeMounts {
		mounted = mounted || vm.MountPath == filepath.Dir(sock)
	}
	if !mounted {
		t.Errorf("the application does not mount %s", filepath.Dir(sock))
	}
}

// TestImageTag: the manifests run the image make image writes. The
// Makefile runs mkimage with its defaults, which are image.Repo and
// image.DeployTag; an unset newTag would mean :latest, which nothing
// writes.
func TestImageTag(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(manifestDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(raw, &k); err != nil {
		t.Fatal(err)
	}
	if len(k.Images) != 1 || k.Images[0].Name != "vnic" || k.Images[0].NewName != image.Repo || k.Images[0].NewTag != image.DeployTag {
		t.Errorf("kustomization images %+v, want vnic -> %s:%s (make image's tag)", k.Images, image.Repo, image.DeployTag)
	}
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(mk), "\n") {
		if strings.Contains(l, "mkimage") && strings.HasPrefix(l, "\t") && (strings.Contains(l, "-tag") || strings.Contains(l, "-repo")) {
			t.Errorf("the Makefile overrides mkimage's -repo or -tag (%q): change kustomization.yaml with it", strings.TrimSpace(l))
		}
	}
	m := load(t)
	for name, spec := range map[string]corev1.PodSpec{"vnicd": m.ds.Spec.Template.Spec, "rxcount": m.app.Spec.Template.Spec} {
		if img := container(t, spec, name).Image; img != "vnic" {
			t.Errorf("%s runs image %q, want vnic (which kustomization.yaml maps)", name, img)
		}
	}
}

// TestRequestsFitTwoCPUs: vnicd and the example application are requested
// together on a node; on a 2-CPU node the kubelet and the system pods need
// some of the two, so the sum must leave at least half a CPU.
func TestRequestsFitTwoCPUs(t *testing.T) {
	m := load(t)
	var sum int64
	for name, spec := range map[string]corev1.PodSpec{"vnicd": m.ds.Spec.Template.Spec, "rxcount": m.app.Spec.Template.Spec} {
		c := container(t, spec, name)
		cpu, ok := c.Resources.Requests[corev1.ResourceCPU]
		if !ok {
			t.Errorf("%s requests no CPU", name)
		}
		lim := c.Resources.Limits[corev1.ResourceCPU]
		if lim.Cmp(cpu) < 0 {
			t.Errorf("%s: CPU limit %s under its request %s", name, lim.String(), cpu.String())
		}
		sum += cpu.MilliValue()
	}
	if sum > 1500 {
		t.Errorf("vnicd and the application request %dm CPU, more than a 2-CPU node has beside the kubelet and system pods (1500m)", sum)
	}
}

// TestDocsGiveTheCPURequest: every place docs/deploy.md says how many
// whole CPUs the DaemonSet asks for gives the manifest's request.
func TestDocsGiveTheCPURequest(t *testing.T) {
	m := load(t)
	cpu := container(t, m.ds.Spec.Template.Spec, "vnicd").Resources.Requests[corev1.ResourceCPU]
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(doc)), " ")
	words := map[string]int64{"one": 1, "two": 2, "three": 3, "four": 4}
	found := 0
	for _, m := range regexp.MustCompile(`(?:DaemonSet asks for|It requests) (\w+) whole CPUs?`).FindAllStringSubmatch(text, -1) {
		found++
		n, ok := words[m[1]]
		if !ok {
			n, _ = strconv.ParseInt(m[1], 10, 64)
		}
		if n*1000 != cpu.MilliValue() {
			t.Errorf("docs/deploy.md: %q, but the DaemonSet requests %s CPU", m[0], cpu.String())
		}
	}
	if found < 2 {
		t.Errorf("docs/deploy.md gives the DaemonSet's CPU request %d times, want 2 (CPU and the manifests)", found)
	}
}

// TestMetricsOffHostNetwork: vnicd shares the host's network, where
// NetworkPolicy does not apply, so by default its metrics listen on
// loopback only.
func TestMetricsOffHostNetwork(t *testing.T) {
	m := load(t)
	c := container(t, m.ds.Spec.Template.Spec, "vnicd")
	var addr string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--metrics-addr="); ok {
			addr = v
		}
	}
	host, _, err := net.SplitHostPort(addr)
	if addr != "" && (err != nil || net.ParseIP(host) == nil || !net.ParseIP(host).IsLoopback()) {
		t.Errorf("--metrics-addr=%s: want a loopback address (or none) on the host network", addr)
	}
	if _, ok := m.ds.Spec.Template.Annotations["prometheus.io/scrape"]; ok {
		t.Error("scrape annotations on a pod whose metrics are on loopback: Prometheus cannot reach them")
	}
}

// TestExampleAppPrivilege: the application is unprivileged; its one
// exception is the hostPath to vnicd's socket directory, read from an
// existing directory (not created), which is why its namespace enforces
// the privileged level (docs/deploy.md says why).
func TestExampleAppPrivilege(t *testing.T) {
	m := load(t)
	spec := m.app.Spec.Template.Spec
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("the application shares a host namespace")
	}
	sock := configValue(t, m.cm, "socket")
	for _, v := range spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		if v.HostPath.Path != filepath.Dir(sock) || v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectory {
			t.Errorf("hostPath %s (type %v): the only one allowed is vnicd's socket directory %s, type Directory", v.HostPath.Path, v.HostPath.Type, filepath.Dir(sock))
		}
	}
	for _, c := range spec.Containers {
		if sc := c.SecurityContext; sc == nil || (sc.Privileged != nil && *sc.Privileged) {
			t.Errorf("container %s is privileged or has no security context", c.Name)
		}
	}
	if lvl := m.ns.Labels["pod-security.kubernetes.io/enforce"]; lvl == "privileged" {
		doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "deploy.md"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), "Why the application needs a hostPath") {
			t.Error("the namespace enforces privileged, and docs/deploy.md does not say why the application needs its hostPath")
		}
	}
}
