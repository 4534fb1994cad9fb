package deploy

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Gateway API Inference Extension's Go module
// (sigs.k8s.io/gateway-api-inference-extension) is not served by the module
// proxy this project can reach, so its objects are decoded into the local
// mirrors below, written from its published schemas of release v1.5.0 (the
// last one that ships the endpoint picker): api/v1/inferencepool_types.go
// and config/crd/bases/inference.networking.k8s.io_inferencepools.yaml for
// the InferencePool, apix/config/v1alpha1/endpointpickerconfig_types.go for
// the EndpointPickerConfig, and the plugins' parameter structs
// (pkg/epp/framework/plugins/datalayer/source/metrics/datasource.go,
// .../extractor/metrics/factories.go). Decoding is strict, so a field the
// schema lacks is an error, as with the Kubernetes types.

// inferencePool mirrors inference.networking.k8s.io/v1 InferencePool.
type inferencePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              inferencePoolSpec `json:"spec"`
}

type inferencePoolSpec struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels,omitempty"`
	} `json:"selector"`
	TargetPorts       []poolPort        `json:"targetPorts"`
	AppProtocol       string            `json:"appProtocol,omitempty"`
	EndpointPickerRef endpointPickerRef `json:"endpointPickerRef"`
}

type poolPort struct {
	Number int32 `json:"number"`
}

type endpointPickerRef struct {
	Group       *string   `json:"group,omitempty"`
	Kind        string    `json:"kind,omitempty"`
	Name        string    `json:"name"`
	Port        *poolPort `json:"port,omitempty"`
	FailureMode string    `json:"failureMode,omitempty"`
}

// endpointPickerConfig mirrors inference.networking.x-k8s.io/v1alpha1
// EndpointPickerConfig, the EPP's --config-file.
type endpointPickerConfig struct {
	metav1.TypeMeta    `json:",inline"`
	FeatureGates       []string            `json:"featureGates,omitempty"`
	Plugins            []pluginSpec        `json:"plugins"`
	SchedulingProfiles []schedulingProfile `json:"schedulingProfiles"`
	SaturationDetector *pluginRef          `json:"saturationDetector,omitempty"`
	DataLayer          *struct {
		Sources []struct {
			PluginRef  string      `json:"pluginRef"`
			Extractors []pluginRef `json:"extractors"`
		} `json:"sources"`
	} `json:"dataLayer"`
	FlowControl json.RawMessage `json:"flowControl,omitempty"`
	Parser      *pluginRef      `json:"parser,omitempty"`
}

type pluginSpec struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Parameters json.RawMessage `json:"parameters"`
}

type pluginRef struct {
	PluginRef string `json:"pluginRef"`
}

type schedulingProfile struct {
	Name    string `json:"name"`
	Plugins []struct {
		PluginRef string   `json:"pluginRef"`
		Weight    *float64 `json:"weight"`
	} `json:"plugins"`
}

// metricsDataSourceParams are the metrics-data-source plugin's parameters.
type metricsDataSourceParams struct {
	Scheme             string `json:"scheme"`
	Path               string `json:"path"`
	InsecureSkipVerify bool   `json:"insecureSkipVerify"`
}

// metricsExtractorParams are the core-metrics-extractor plugin's parameters.
type metricsExtractorParams struct {
	EngineLabelKey string         `json:"engineLabelKey"`
	DefaultEngine  string         `json:"defaultEngine"`
	EngineConfigs  []engineConfig `json:"engineConfigs"`
}

type engineConfig struct {
	Name                    string `json:"name"`
	QueuedRequestsSpec      string `json:"queuedRequestsSpec"`
	RunningRequestsSpec     string `json:"runningRequestsSpec"`
	KVUsageSpec             string `json:"kvUsageSpec"`
	LoRASpec                string `json:"loraSpec"`
	CacheInfoSpec           string `json:"cacheInfoSpec"`
	CacheBlockSizeLabelName string `json:"cacheBlockSizeLabelName,omitempty"`
	CacheNumBlocksLabelName string `json:"cacheNumBlocksLabelName,omitempty"`
	CacheBlockSizeSpec      string `json:"cacheBlockSizeSpec,omitempty"`
	CacheNumBlocksSpec      string `json:"cacheNumBlocksSpec,omitempty"`
}

// kustomization is the part of kustomize.config.k8s.io/v1beta1
// Kustomization the base uses; any other field is refused, so a base that
// grows one makes this test grow with it.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources"`
}

// knownPlugins are the EPP v1.5.0 plugin types this base configures.
var knownPlugins = map[string]bool{
	"queue-scorer":                true,
	"kv-cache-utilization-scorer": true,
	"prefix-cache-scorer":         true,
	"metrics-data-source":         true,
	"core-metrics-extractor":      true,
}
