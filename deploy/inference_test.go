package deploy

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/mlxcel/mlxcel/internal/app"
	"github.com/mlxcel/mlxcel/internal/server"
)

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
