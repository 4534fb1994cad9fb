package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/mlxcel/mlxcel/internal/hub"
	"github.com/mlxcel/mlxcel/internal/server"
)

const baseDir = "base"

// object is one decoded manifest document.
type object struct {
	where string // file#document
	obj   any
}

// newObject returns the typed value for an apiVersion and kind, or nil.
func newObject(tm metav1.TypeMeta) any {
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 Namespace":
		return &corev1.Namespace{}
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}
	case "v1 Service":
		return &corev1.Service{}
	case "v1 PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}
	case "rbac.authorization.k8s.io/v1 Role":
		return &rbacv1.Role{}
	case "rbac.authorization.k8s.io/v1 RoleBinding":
		return &rbacv1.RoleBinding{}
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}
	case "gateway.networking.k8s.io/v1 HTTPRoute":
		return &gatewayv1.HTTPRoute{}
	case "inference.networking.k8s.io/v1 InferencePool":
		return &inferencePool{}
	}
	return nil
}

// decodeDocs decodes every YAML document of data strictly: unknown fields,
// duplicate keys and unknown kinds are errors.
func decodeDocs(name string, data []byte) ([]object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []object
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		where := fmt.Sprintf("%s#%d", name, i)
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		if string(bytes.TrimSpace(js)) == "null" {
			continue // only comments
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		o := newObject(tm)
		if o == nil {
			return nil, fmt.Errorf("%s: unknown apiVersion/kind %q %q", where, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, o); err != nil {
			return nil, fmt.Errorf("%s (%s): %v", where, tm.Kind, err)
		}
		out = append(out, object{where, o})
	}
}

// loadBase decodes the kustomization and every resource it lists.
func loadBase(t *testing.T) (kustomization, []object) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(baseDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("kustomization.yaml: apiVersion %q kind %q", k.APIVersion, k.Kind)
	}
	// Every manifest in the folder is listed, and every listed one exists.
	files, _ := filepath.Glob(filepath.Join(baseDir, "*.yaml"))
	var onDisk []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			onDisk = append(onDisk, b)
		}
	}
	listed := slices.Sorted(slices.Values(k.Resources))
	if !slices.Equal(onDisk, listed) {
		t.Fatalf("kustomization resources %v, folder holds %v", listed, onDisk)
	}
	var objs []object
	for _, f := range k.Resources {
		data, err := os.ReadFile(filepath.Join(baseDir, f))
		if err != nil {
			t.Fatal(err)
		}
		o, err := decodeDocs(f, data)
		if err != nil {
			t.Fatal(err)
		}
		if len(o) == 0 {
			t.Fatalf("%s: no object", f)
		}
		objs = append(objs, o...)
	}
	return k, objs
}

// find returns the one object of type T named name.
func find[T any](t *testing.T, objs []object, name string) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if v, ok := o.obj.(T); ok {
			if m, ok := o.obj.(metav1.Object); ok && m.GetName() == name {
				found = append(found, v)
			}
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("%d objects of type %T named %q, want 1", len(found), zero, name)
	}
	return found[0]
}

// manifests are the objects the checks below tie together.
type manifests struct {
	ns         kustomization
	all        []object
	model      *appsv1.Deployment
	svc        *corev1.Service
	monitor    *monitoringv1.ServiceMonitor
	pool       *inferencePool
	epp        *appsv1.Deployment
	eppSvc     *corev1.Service
	eppConfig  *corev1.ConfigMap
	route      *gatewayv1.HTTPRoute
	hubCache   *corev1.PersistentVolumeClaim
	role       *rbacv1.Role
	binding    *rbacv1.RoleBinding
	eppAccount *corev1.ServiceAccount
}

func load(t *testing.T) manifests {
	k, objs := loadBase(t)
	return manifests{
		ns: k, all: objs,
		model:      find[*appsv1.Deployment](t, objs, "mlxcel"),
		svc:        find[*corev1.Service](t, objs, "mlxcel"),
		monitor:    find[*monitoringv1.ServiceMonitor](t, objs, "mlxcel"),
		pool:       find[*inferencePool](t, objs, "mlxcel"),
		epp:        find[*appsv1.Deployment](t, objs, "mlxcel-epp"),
		eppSvc:     find[*corev1.Service](t, objs, "mlxcel-epp"),
		eppConfig:  find[*corev1.ConfigMap](t, objs, "mlxcel-epp"),
		route:      find[*gatewayv1.HTTPRoute](t, objs, "mlxcel"),
		hubCache:   find[*corev1.PersistentVolumeClaim](t, objs, "mlxcel-hub-cache"),
		role:       find[*rbacv1.Role](t, objs, "mlxcel-epp"),
		binding:    find[*rbacv1.RoleBinding](t, objs, "mlxcel-epp"),
		eppAccount: find[*corev1.ServiceAccount](t, objs, "mlxcel-epp"),
	}
}

func container(t *testing.T, d *appsv1.Deployment, name string) *corev1.Container {
	t.Helper()
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == name {
			return c
		}
	}
	t.Fatalf("deployment %s has no container %q", d.Name, name)
	return nil
}

// expand replaces $(VAR) by the container's env values as the kubelet does
// in command and args ($$ is a literal $); a reference to an undefined
// variable is an error here (the kubelet would pass it through verbatim).
func expand(c *corev1.Container, s string) (string, error) {
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	var err error
	out := regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		name := m[2 : len(m)-1]
		v, ok := env[name]
		if !ok {
			err = fmt.Errorf("%s: $(%s) is not in the container's env", c.Name, name)
		}
		return v
	})
	return out, err
}

func envValue(c *corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, e.ValueFrom == nil
		}
	}
	return "", false
}

// containerPort resolves a probe's or a Service's port (a name or a number)
// on a container, or fails.
func containerPort(t *testing.T, c *corev1.Container, p intstr.IntOrString, what string) int32 {
	t.Helper()
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort
		}
	}
	t.Fatalf("%s: port %s is not a port of container %s", what, p.String(), c.Name)
	return 0
}

// serveFlags parses the model container's args with mlxcel serve's own
// flag set (server.Flags.Register, what server.Main parses).
func serveFlags(t *testing.T, c *corev1.Container) *server.Flags {
	t.Helper()
	var args []string
	for _, a := range append(slices.Clone(c.Command), c.Args...) {
		v, err := expand(c, a)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, v)
	}
	if len(args) < 2 || filepath.Base(args[0]) != "mlxcel" || args[1] != "serve" {
		t.Fatalf("container %s runs %q, want mlxcel serve ...", c.Name, args)
	}
	fs := flag.NewFlagSet("mlxcel serve", flag.ContinueOnError)
	var usage bytes.Buffer
	fs.SetOutput(&usage)
	var f server.Flags
	f.Register(fs)
	if err := fs.Parse(args[2:]); err != nil {
		t.Fatalf("mlxcel serve %q: %v", args[2:], err)
	}
	if fs.NArg() > 0 {
		t.Fatalf("mlxcel serve: unexpected arguments %q", fs.Args())
	}
	return &f
}

func TestManifestsDecodeStrictly(t *testing.T) {
	m := load(t)
	if len(m.all) != 13 {
		t.Errorf("%d objects, want 13 (a new one needs its checks here)", len(m.all))
	}
	if m.ns.Namespace == "" {
		t.Fatal("kustomization sets no namespace: the RoleBinding's ServiceAccount subject needs one")
	}
	find[*corev1.Namespace](t, m.all, m.ns.Namespace)
	for _, o := range m.all {
		if mo, ok := o.obj.(metav1.Object); ok && mo.GetNamespace() != "" {
			t.Errorf("%s: namespace %q set in the base; the kustomization sets it", o.where, mo.GetNamespace())
		}
	}
}

// TestStrictDecodeCatchesTypos: the decoder refuses a misspelt field and an
// unknown kind, in the Kubernetes types and in the local mirrors alike.
func TestStrictDecodeCatchesTypos(t *testing.T) {
	for _, file := range []string{"deployment.yaml", "inferencepool.yaml", "servicemonitor.yaml", "httproute.yaml"} {
		data, err := os.ReadFile(filepath.Join(baseDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeDocs(file, data); err != nil {
			t.Fatal(err)
		}
		for from, to := range map[string]string{"spec:": "spce:", "name:": "nmae:"} {
			bad := bytes.Replace(data, []byte(from), []byte(to), 1)
			if _, err := decodeDocs(file, bad); err == nil || !strings.Contains(err.Error(), "unknown field") {
				t.Errorf("%s with %q: %v, want an unknown-field error", file, to, err)
			}
		}
	}
	if _, err := decodeDocs("x", []byte("apiVersion: apps/v1\nkind: Deployemnt\n")); err == nil {
		t.Error("unknown kind accepted")
	}
	if _, err := decodeDocs("x", []byte("apiVersion: v1\nkind: Service\nmetadata: {name: a}\nmetadata: {name: b}\n")); err == nil {
		t.Error("duplicate key accepted")
	}
}

func TestModelServerDeployment(t *testing.T) {
	m := load(t)
	d := m.model
	pod := d.Spec.Template
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
		t.Fatalf("deployment selector %v does not match its pods %v (%v)", d.Spec.Selector, pod.Labels, err)
	}
	c := container(t, d, "mlxcel")
	f := serveFlags(t, c)
	if f.Host != "0.0.0.0" {
		t.Errorf("--host %q: a pod must listen on all interfaces", f.Host)
	}
	if f.Backend != "cuda" {
		t.Errorf("--backend %q on a GPU pod", f.Backend)
	}
	http := containerPort(t, c, intstr.FromString("http"), "serve")
	if int32(f.Port) != http {
		t.Errorf("--port %d, container port http %d", f.Port, http)
	}
	gpus := c.Resources.Limits[corev1.ResourceName("nvidia.com/gpu")]
	if gpus.Value() != 1 {
		t.Errorf("nvidia.com/gpu limit %v, want 1 (the server drives one GPU)", gpus.String())
	}

	// The model: a Hub name, pulled by the init container into the cache
	// volume that the server reads offline.
	if _, err := hub.ParseRef(f.Model); err != nil || !strings.Contains(f.Model, "/") {
		t.Fatalf("--model %q is not an ORG/NAME Hub name: %v", f.Model, err)
	}
	if len(pod.Spec.InitContainers) != 1 {
		t.Fatalf("%d init containers, want the pull", len(pod.Spec.InitContainers))
	}
	pull := &pod.Spec.InitContainers[0]
	var pullArgs []string
	for _, a := range append(slices.Clone(pull.Command), pull.Args...) {
		v, err := expand(pull, a)
		if err != nil {
			t.Fatal(err)
		}
		pullArgs = append(pullArgs, v)
	}
	if want := []string{"mlxcel", "pull", f.Model}; !slices.Equal(pullArgs, want) {
		t.Errorf("init container runs %q, want %q", pullArgs, want)
	}
	if pull.Image != c.Image {
		t.Errorf("init image %q, server image %q", pull.Image, c.Image)
	}
	cache, ok := envValue(c, "HF_HUB_CACHE")
	if pc, _ := envValue(pull, "HF_HUB_CACHE"); !ok || pc != cache {
		t.Errorf("HF_HUB_CACHE: server %q, pull %q", cache, pc)
	}
	if v, _ := envValue(c, "HF_HUB_OFFLINE"); v != "1" {
		t.Errorf("server HF_HUB_OFFLINE %q: the init container pulled, the server must not download under its probes", v)
	}
	for _, ctr := range []*corev1.Container{c, pull} {
		if v, _ := envValue(ctr, "MODEL"); v == "" {
			t.Errorf("%s: no MODEL", ctr.Name)
		}
		for _, e := range ctr.Env {
			if strings.HasPrefix(e.Name, "MLXCEL_") {
				t.Errorf("%s sets %s: settings belong in flags here", ctr.Name, e.Name)
			}
		}
		mounted := false
		for _, vm := range ctr.VolumeMounts {
			if vm.MountPath == cache {
				mounted = true
				var vol *corev1.Volume
				for i := range pod.Spec.Volumes {
					if pod.Spec.Volumes[i].Name == vm.Name {
						vol = &pod.Spec.Volumes[i]
					}
				}
				if vol == nil || vol.PersistentVolumeClaim == nil || vol.PersistentVolumeClaim.ClaimName != m.hubCache.Name {
					t.Errorf("%s: %s is not the hub cache claim %s", ctr.Name, vm.Name, m.hubCache.Name)
				}
			}
		}
		if !mounted {
			t.Errorf("%s: nothing mounted at HF_HUB_CACHE %s", ctr.Name, cache)
		}
	}
	if !slices.Contains(m.hubCache.Spec.AccessModes, corev1.ReadWriteMany) {
		t.Errorf("hub cache access modes %v: replicas on several nodes need ReadWriteMany", m.hubCache.Spec.AccessModes)
	}

	// Probes: all on /health of a real port; startup covers the load.
	probes := map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe}
	for kind, p := range probes {
		if p == nil || p.HTTPGet == nil {
			t.Fatalf("%s probe: want an httpGet", kind)
		}
		if p.HTTPGet.Path != "/health" {
			t.Errorf("%s probe path %q, want /health", kind, p.HTTPGet.Path)
		}
		if containerPort(t, c, p.HTTPGet.Port, kind+" probe") != int32(f.Port) {
			t.Errorf("%s probe port is not the server's", kind)
		}
		if p.TimeoutSeconds < 2 {
			t.Errorf("%s probe timeout %d s: /health took up to 0.45 s under 20k connections (docs/server.md)", kind, p.TimeoutSeconds)
		}
	}
	if s := c.StartupProbe; s.PeriodSeconds*s.FailureThreshold < 600 {
		t.Errorf("startup probe allows %d s to load, want at least 10 minutes", s.PeriodSeconds*s.FailureThreshold)
	}
	if l := c.LivenessProbe; l.PeriodSeconds*l.FailureThreshold < 30 {
		t.Errorf("liveness probe restarts after %d s of failures: a busy server must not be killed that fast", l.PeriodSeconds*l.FailureThreshold)
	}

	// Drain: preStop sleep, then SIGTERM drains for --shutdown-timeout;
	// the server then stops the engine (waits up to 5 s) and closes the
	// listener (1 s) before exiting (internal/server/drain.go).
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("no preStop sleep")
	}
	preStop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	if preStop < 5*time.Second {
		t.Errorf("preStop sleep %v: endpoint removal needs a few seconds to reach the proxies", preStop)
	}
	if f.ShutdownTimeout < 60*time.Second {
		t.Errorf("--shutdown-timeout %v: too short for long generations", f.ShutdownTimeout)
	}
	need := preStop + f.ShutdownTimeout + 6*time.Second
	grace := pod.Spec.TerminationGracePeriodSeconds
	if grace == nil {
		t.Error("no terminationGracePeriodSeconds")
	} else if time.Duration(*grace)*time.Second < need {
		t.Errorf("terminationGracePeriodSeconds %d < preStop %v + --shutdown-timeout %v + 6 s", *grace, preStop, f.ShutdownTimeout)
	}
	if rs := d.Spec.Strategy.RollingUpdate; rs == nil || rs.MaxSurge == nil || rs.MaxSurge.IntValue() != 0 {
		t.Errorf("rolling update %v: a surge pod needs a spare GPU", rs)
	}
}

func TestServiceAndMonitor(t *testing.T) {
	m := load(t)
	pod := m.model.Spec.Template
	c := container(t, m.model, "mlxcel")
	if !labels.SelectorFromSet(m.svc.Spec.Selector).Matches(labels.Set(pod.Labels)) || len(m.svc.Spec.Selector) == 0 {
		t.Errorf("service selector %v does not match the model pods %v", m.svc.Spec.Selector, pod.Labels)
	}
	if labels.SelectorFromSet(m.svc.Spec.Selector).Matches(labels.Set(m.epp.Spec.Template.Labels)) {
		t.Errorf("service selector %v also matches the endpoint picker's pods", m.svc.Spec.Selector)
	}
	svcPorts := map[string]bool{}
	for _, p := range m.svc.Spec.Ports {
		svcPorts[p.Name] = true
		containerPort(t, c, p.TargetPort, "service port "+p.Name)
	}
	sel, err := metav1.LabelSelectorAsSelector(&m.monitor.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(m.svc.Labels)) {
		t.Errorf("servicemonitor selector %v does not match the service's labels %v (%v)", m.monitor.Spec.Selector, m.svc.Labels, err)
	}
	if len(m.monitor.Spec.Endpoints) != 1 {
		t.Fatalf("%d servicemonitor endpoints, want 1", len(m.monitor.Spec.Endpoints))
	}
	ep := m.monitor.Spec.Endpoints[0]
	if !svcPorts[ep.Port] {
		t.Errorf("servicemonitor port %v is not a port name of the service (%v)", ep.Port, svcPorts)
	}
	if ep.Path != "/metrics" {
		t.Errorf("servicemonitor path %q", ep.Path)
	}
	iv, err1 := model.ParseDuration(string(ep.Interval))
	to, err2 := model.ParseDuration(string(ep.ScrapeTimeout))
	if err1 != nil || err2 != nil || to > iv {
		t.Errorf("scrape interval %q timeout %q", ep.Interval, ep.ScrapeTimeout)
	}
}
