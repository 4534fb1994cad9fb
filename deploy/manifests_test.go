package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
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

	"github.com/mlxcel/mlxcel/internal/app"
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

func TestInferencePoolAndRoute(t *testing.T) {
	m := load(t)
	p := m.pool
	pod := m.model.Spec.Template
	if len(p.Spec.Selector.MatchLabels) == 0 || !labels.SelectorFromSet(p.Spec.Selector.MatchLabels).Matches(labels.Set(pod.Labels)) {
		t.Errorf("pool selector %v does not match the model pods %v", p.Spec.Selector.MatchLabels, pod.Labels)
	}
	if labels.SelectorFromSet(p.Spec.Selector.MatchLabels).Matches(labels.Set(m.epp.Spec.Template.Labels)) {
		t.Error("pool selector also matches the endpoint picker's pods")
	}
	// The CRD's validation: 1-8 unique ports in 1..65535, enums.
	if n := len(p.Spec.TargetPorts); n < 1 || n > 8 {
		t.Errorf("%d target ports", n)
	}
	f := serveFlags(t, container(t, m.model, "mlxcel"))
	if len(p.Spec.TargetPorts) != 1 || p.Spec.TargetPorts[0].Number != int32(f.Port) {
		t.Errorf("pool target ports %v, server --port %d", p.Spec.TargetPorts, f.Port)
	}
	if !slices.Contains([]string{"", "http", "kubernetes.io/h2c"}, p.Spec.AppProtocol) || p.Spec.AppProtocol == "kubernetes.io/h2c" {
		t.Errorf("appProtocol %q: mlxcel speaks HTTP/1.1", p.Spec.AppProtocol)
	}
	ref := p.Spec.EndpointPickerRef
	if !slices.Contains([]string{"FailOpen", "FailClose"}, ref.FailureMode) {
		t.Errorf("failureMode %q", ref.FailureMode)
	}
	if (ref.Group != nil && *ref.Group != "") || (ref.Kind != "" && ref.Kind != "Service") {
		t.Errorf("endpointPickerRef %v: want the core Service", ref)
	}
	if ref.Name != m.eppSvc.Name || ref.Port == nil {
		t.Fatalf("endpointPickerRef %+v does not name service %s with a port", ref, m.eppSvc.Name)
	}
	eppC := container(t, m.epp, "epp")
	found := false
	for _, sp := range m.eppSvc.Spec.Ports {
		if sp.Port == ref.Port.Number {
			found = true
			if got := containerPort(t, eppC, sp.TargetPort, "epp service"); got != 9002 {
				t.Errorf("endpoint picker port %d reaches container port %d, want the ext-proc port 9002", sp.Port, got)
			}
		}
	}
	if !found {
		t.Errorf("endpointPickerRef port %d is not on service %s", ref.Port.Number, m.eppSvc.Name)
	}
	if !labels.SelectorFromSet(m.eppSvc.Spec.Selector).Matches(labels.Set(m.epp.Spec.Template.Labels)) {
		t.Error("epp service does not select the epp pods")
	}

	// The route sends everything to the pool.
	r := m.route
	if len(r.Spec.ParentRefs) != 1 || r.Spec.ParentRefs[0].Kind == nil || *r.Spec.ParentRefs[0].Kind != "Gateway" {
		t.Errorf("route parents %v", r.Spec.ParentRefs)
	}
	if len(r.Spec.Rules) != 1 || len(r.Spec.Rules[0].BackendRefs) != 1 {
		t.Fatalf("route rules %v", r.Spec.Rules)
	}
	b := r.Spec.Rules[0].BackendRefs[0]
	if b.Group == nil || string(*b.Group) != "inference.networking.k8s.io" || b.Kind == nil || *b.Kind != "InferencePool" || string(b.Name) != p.Name {
		group, kind := "", ""
		if b.Group != nil {
			group = string(*b.Group)
		}
		if b.Kind != nil {
			kind = string(*b.Kind)
		}
		t.Errorf("route backend %q %q %q, want inference.networking.k8s.io InferencePool %s", group, kind, b.Name, p.Name)
	}
	if to := r.Spec.Rules[0].Timeouts; to == nil || to.Request == nil {
		t.Error("route has no request timeout: implementations default to seconds")
	} else if d, err := time.ParseDuration(string(*to.Request)); err != nil || d < f.ShutdownTimeout {
		t.Errorf("route request timeout %q shorter than what a request may take (--shutdown-timeout %v)", *to.Request, f.ShutdownTimeout)
	}
}

// eppSetup decodes the endpoint picker's config from its ConfigMap, as the
// EPP reads it through --config-file.
func eppSetup(t *testing.T, m manifests) (endpointPickerConfig, metricsDataSourceParams, metricsExtractorParams) {
	t.Helper()
	c := container(t, m.epp, "epp")
	args := c.Args
	flagValue := func(name string) string {
		for i, a := range args {
			if a == "--"+name && i+1 < len(args) {
				return args[i+1]
			}
		}
		t.Fatalf("epp has no --%s", name)
		return ""
	}
	if got := flagValue("pool-name"); got != m.pool.Name {
		t.Errorf("epp --pool-name %q, pool %q", got, m.pool.Name)
	}
	if got := flagValue("pool-group"); got != "inference.networking.k8s.io" {
		t.Errorf("epp --pool-group %q", got)
	}
	if v, _ := envValue(c, "NAMESPACE"); v != "" || !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
	}) {
		t.Error("epp: NAMESPACE must come from metadata.namespace (the pool's namespace)")
	}
	if m.epp.Spec.Template.Spec.ServiceAccountName != m.eppAccount.Name {
		t.Errorf("epp service account %q", m.epp.Spec.Template.Spec.ServiceAccountName)
	}
	cfgPath := flagValue("config-file")
	var data string
	for _, vm := range c.VolumeMounts {
		dir, key := filepath.Dir(cfgPath), filepath.Base(cfgPath)
		if vm.MountPath != dir {
			continue
		}
		for _, v := range m.epp.Spec.Template.Spec.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil && v.ConfigMap.Name == m.eppConfig.Name {
				data = m.eppConfig.Data[key]
			}
		}
	}
	if data == "" {
		t.Fatalf("--config-file %s is not a key of configmap %s mounted in the epp", cfgPath, m.eppConfig.Name)
	}
	var cfg endpointPickerConfig
	if err := yaml.UnmarshalStrict([]byte(data), &cfg); err != nil {
		t.Fatalf("EndpointPickerConfig: %v", err)
	}
	if cfg.APIVersion != "inference.networking.x-k8s.io/v1alpha1" || cfg.Kind != "EndpointPickerConfig" {
		t.Fatalf("EndpointPickerConfig apiVersion %q kind %q", cfg.APIVersion, cfg.Kind)
	}
	var src metricsDataSourceParams
	var ext metricsExtractorParams
	names := map[string]string{}
	for _, p := range cfg.Plugins {
		if !knownPlugins[p.Type] {
			t.Errorf("plugin type %q is not one of EPP v1.5.0's that this base uses", p.Type)
		}
		name := p.Name
		if name == "" {
			name = p.Type // the EPP's default
		}
		if names[name] != "" {
			t.Errorf("two plugins named %q", name)
		}
		names[name] = p.Type
		var err error
		switch p.Type {
		case "metrics-data-source":
			err = yaml.UnmarshalStrict(p.Parameters, &src)
		case "core-metrics-extractor":
			err = yaml.UnmarshalStrict(p.Parameters, &ext)
		default:
			if len(p.Parameters) > 0 {
				err = errors.New("parameters given; this test does not know their schema")
			}
		}
		if err != nil {
			t.Errorf("plugin %s parameters: %v", name, err)
		}
	}
	if cfg.DataLayer == nil || len(cfg.DataLayer.Sources) != 1 {
		t.Fatalf("dataLayer %v: want the metrics source", cfg.DataLayer)
	}
	s := cfg.DataLayer.Sources[0]
	if names[s.PluginRef] != "metrics-data-source" || len(s.Extractors) != 1 || names[s.Extractors[0].PluginRef] != "core-metrics-extractor" {
		t.Errorf("data layer source %+v", s)
	}
	if len(cfg.SchedulingProfiles) != 1 {
		t.Fatalf("%d scheduling profiles", len(cfg.SchedulingProfiles))
	}
	for _, sp := range cfg.SchedulingProfiles[0].Plugins {
		if names[sp.PluginRef] == "" {
			t.Errorf("profile refers to undeclared plugin %q", sp.PluginRef)
		}
		if sp.Weight == nil || *sp.Weight <= 0 {
			t.Errorf("scorer %s has no positive weight", sp.PluginRef)
		}
	}
	return cfg, src, ext
}

// TestEndpointPickerReadsMlxcelMetrics: the picker's extractor maps the
// protocol's signals to metric names that a real mlxcel server exposes as
// gauges, on the pods' engine label, through the path and port the server
// serves; and the EPP has the RBAC its watches need.
func TestEndpointPickerReadsMlxcelMetrics(t *testing.T) {
	m := load(t)
	_, src, ext := eppSetup(t, m)
	if src.Scheme != "http" || src.Path != "/metrics" {
		t.Errorf("metrics source %+v: mlxcel serves plain http on /metrics", src)
	}
	pod := m.model.Spec.Template
	engine := pod.Labels[ext.EngineLabelKey]
	if ext.EngineLabelKey != "inference.networking.k8s.io/engine-type" || engine == "" {
		t.Errorf("model pods carry no %q label", ext.EngineLabelKey)
	}
	var mlx *engineConfig
	for i := range ext.EngineConfigs {
		if ext.EngineConfigs[i].Name == engine {
			mlx = &ext.EngineConfigs[i]
		}
	}
	if mlx == nil || ext.DefaultEngine != engine {
		t.Fatalf("no engine config %q (default %q)", engine, ext.DefaultEngine)
	}
	if mlx.LoRASpec != "" {
		t.Errorf("loraSpec %q: mlxcel serves no adapters", mlx.LoRASpec)
	}
	want := map[string]string{
		mlx.QueuedRequestsSpec:  "mlxcel_num_requests_waiting",
		mlx.RunningRequestsSpec: "mlxcel_num_requests_running",
		mlx.KVUsageSpec:         "mlxcel_kv_cache_usage_ratio",
		mlx.CacheInfoSpec:       "mlxcel_cache_config_info",
	}
	if len(want) != 4 {
		t.Fatalf("engine config %+v repeats a metric", mlx)
	}
	for got, w := range want {
		if got != w {
			t.Errorf("engine spec %q, want %q (docs/metrics.md)", got, w)
		}
	}

	// A real server: loading, serving (the embedded model), draining.
	s := server.New(server.Options{})
	defer s.Close()
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	probe := container(t, m.model, "mlxcel").ReadinessProbe.HTTPGet.Path
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(probe); code != http.StatusServiceUnavailable {
		t.Errorf("%s while loading: %d, want 503 (not ready)", probe, code)
	}
	l, err := app.Load(app.Options{Backend: "cpu", Threads: 1, Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(l); err != nil {
		t.Fatal(err)
	}
	if code, body := get(probe); code != http.StatusOK || !strings.Contains(body, `"ok"`) {
		t.Errorf("%s when serving: %d %s", probe, code, body)
	}
	_, text := get(src.Path)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parsing %s: %v", src.Path, err)
	}
	for spec := range want {
		fam, ok := families[spec]
		switch {
		case !ok:
			t.Errorf("%s: not on %s", spec, src.Path)
		case fam.GetType() != dto.MetricType_GAUGE || len(fam.Metric) == 0:
			t.Errorf("%s: a %v with %d series, want a gauge", spec, fam.GetType(), len(fam.Metric))
		}
	}
	if fam := families[mlx.CacheInfoSpec]; fam != nil {
		got := map[string]bool{}
		for _, lp := range fam.Metric[0].Label {
			got[lp.GetName()] = lp.GetValue() != ""
		}
		// The extractor's default label names (no override in the config).
		if !got["block_size"] || !got["num_gpu_blocks"] || mlx.CacheBlockSizeLabelName != "" || mlx.CacheNumBlocksLabelName != "" {
			t.Errorf("%s labels %v, want block_size and num_gpu_blocks", mlx.CacheInfoSpec, got)
		}
	}
	if fam := families[mlx.KVUsageSpec]; fam != nil {
		if v := fam.Metric[0].GetGauge().GetValue(); v < 0 || v > 1 {
			t.Errorf("%s = %v, want a fraction", mlx.KVUsageSpec, v)
		}
	}
	s.Drain()
	if code, body := get(probe); code != http.StatusServiceUnavailable || !strings.Contains(body, "draining") {
		t.Errorf("%s while draining: %d %s, want 503 draining", probe, code, body)
	}

	// RBAC: the EPP watches pods and InferencePools in its namespace.
	if m.binding.RoleRef.Kind != "Role" || m.binding.RoleRef.Name != m.role.Name {
		t.Errorf("rolebinding refers to %v", m.binding.RoleRef)
	}
	if len(m.binding.Subjects) != 1 || m.binding.Subjects[0].Kind != "ServiceAccount" || m.binding.Subjects[0].Name != m.eppAccount.Name {
		t.Errorf("rolebinding subjects %v", m.binding.Subjects)
	}
	can := func(group, resource string) bool {
		for _, r := range m.role.Rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) &&
				slices.Contains(r.Verbs, "watch") && slices.Contains(r.Verbs, "list") && slices.Contains(r.Verbs, "get") {
				return true
			}
		}
		return false
	}
	if !can("", "pods") || !can("inference.networking.k8s.io", "inferencepools") {
		t.Errorf("role %s cannot get/list/watch pods and inferencepools: %v", m.role.Name, m.role.Rules)
	}
}

// TestKustomizeBuild builds the base with kubectl's kustomize where kubectl
// is installed and decodes the result just as strictly.
func TestKustomizeBuild(t *testing.T) {
	k, objs := loadBase(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	out, err := exec.Command(kubectl, "kustomize", baseDir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, out)
	}
	built, err := decodeDocs("kustomize build", out)
	if err != nil {
		t.Fatal(err)
	}
	if len(built) != len(objs) {
		t.Fatalf("built %d objects, base has %d", len(built), len(objs))
	}
	for _, o := range built {
		mo := o.obj.(metav1.Object)
		if _, isNS := o.obj.(*corev1.Namespace); !isNS && mo.GetNamespace() != k.Namespace {
			t.Errorf("%s %s: namespace %q after build, want %q", o.where, mo.GetName(), mo.GetNamespace(), k.Namespace)
		}
		if rb, ok := o.obj.(*rbacv1.RoleBinding); ok {
			for _, s := range rb.Subjects {
				if s.Namespace != k.Namespace {
					t.Errorf("rolebinding subject %s namespace %q after build", s.Name, s.Namespace)
				}
			}
		}
	}
}
