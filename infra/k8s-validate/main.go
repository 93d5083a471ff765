// k8s-validate checks rendered Kubernetes manifests offline, as an API server would take them.
//
// Built-in kinds are decoded strictly into their Go types (client-go's scheme, the k8s.io/api structs):
// an unknown or duplicated field, or a value of the wrong type (a quantity that does not parse, a string
// where an integer goes), is an error. Custom resources (KEDA's ScaledObject and TriggerAuthentication)
// are checked against the OpenAPI schema of their CustomResourceDefinition, given with -crd (KEDA's own,
// from its Go module): fields the schema does not know are the fields the API server would prune, and
// the values are validated with kube-openapi's validator, as the API server does. A kind neither knows is
// an error. Then what the API server leaves to the cluster: names, labels and annotations as the API
// validates them, each Deployment's selector matching its pods, probes and Services naming ports the
// pods have, mounts naming volumes, PodDisruptionBudgets, Services and ScaledObjects selecting or naming
// a Deployment of the set.
//
// Usage: helm template ... | k8s-validate -crd keda.sh_scaledobjects.yaml -crd keda.sh_triggerauthentications.yaml
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/yaml"
)

var percent = regexp.MustCompile(`^[0-9]+%$`)

type crdFlags []string

func (c *crdFlags) String() string     { return strings.Join(*c, ",") }
func (c *crdFlags) Set(v string) error { *c = append(*c, v); return nil }

// A custom resource's version: its structural schema (for pruning) and its OpenAPI schema (for values).
type crdSchema struct {
	structural *structuralschema.Structural
	openAPI    *spec.Schema
}

// What the cross-checks need of each object.
type rendered struct {
	gvk  schema.GroupVersionKind
	name string
	obj  runtime.Object         // built-in kinds
	raw  map[string]interface{} // custom resources
}

func main() {
	var crds crdFlags
	flag.Var(&crds, "crd", "a CustomResourceDefinition (YAML) whose resources may appear; repeatable")
	flag.Parse()
	schemas, err := loadCRDs(crds)
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8s-validate:", err)
		os.Exit(2)
	}
	var input io.Reader = os.Stdin
	if flag.NArg() > 0 {
		var readers []io.Reader
		for _, path := range flag.Args() {
			f, err := os.Open(path)
			if err != nil {
				fmt.Fprintln(os.Stderr, "k8s-validate:", err)
				os.Exit(2)
			}
			defer f.Close()
			readers = append(readers, f, strings.NewReader("\n---\n"))
		}
		input = io.MultiReader(readers...)
	}
	objects, problems := decodeAll(input, schemas)
	problems = append(problems, crossCheck(objects)...)
	kinds := map[string]int{}
	for _, o := range objects {
		kinds[o.gvk.Kind]++
	}
	for _, p := range problems {
		fmt.Println("INVALID", p)
	}
	fmt.Printf("%d objects %v, %d problems\n", len(objects), kinds, len(problems))
	if len(problems) > 0 || len(objects) == 0 {
		os.Exit(1)
	}
}

func loadCRDs(paths []string) (map[schema.GroupVersionKind]crdSchema, error) {
	schemas := map[schema.GroupVersionKind]crdSchema{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, version := range crd.Spec.Versions {
			if version.Schema == nil || version.Schema.OpenAPIV3Schema == nil {
				return nil, fmt.Errorf("%s: version %s has no schema", path, version.Name)
			}
			var internal apiextensionsinternal.JSONSchemaProps
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(version.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			structural, err := structuralschema.NewStructural(&internal)
			if err != nil {
				return nil, fmt.Errorf("%s: not a structural schema: %w", path, err)
			}
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: version.Name, Kind: crd.Spec.Names.Kind}
			schemas[gvk] = crdSchema{structural: structural, openAPI: structural.ToKubeOpenAPI()}
		}
	}
	return schemas, nil
}

func decodeAll(input io.Reader, crds map[schema.GroupVersionKind]crdSchema) ([]rendered, []string) {
	strict := k8sjson.NewSerializerWithOptions(k8sjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, k8sjson.SerializerOptions{Strict: true})
	reader := utilyaml.NewYAMLReader(bufio.NewReader(input))
	var objects []rendered
	var problems []string
	for n := 1; ; n++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return objects, append(problems, fmt.Sprintf("document %d: %v", n, err))
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		data, err := yaml.YAMLToJSONStrict(doc) // a key given twice is an error
		if err != nil {
			problems = append(problems, fmt.Sprintf("document %d: %v", n, err))
			continue
		}
		var meta struct {
			metav1.TypeMeta
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(data, &meta); err != nil {
			problems = append(problems, fmt.Sprintf("document %d: %v", n, err))
			continue
		}
		gvk := meta.GroupVersionKind()
		where := fmt.Sprintf("%s %q", gvk.Kind, meta.Metadata.Name)
		problems = append(problems, prefixed(where, validateMeta(gvk.Kind, &meta.Metadata))...)
		if crd, ok := crds[gvk]; ok {
			var raw map[string]interface{}
			if err := json.Unmarshal(data, &raw); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", where, err))
				continue
			}
			problems = append(problems, prefixed(where, validateCustom(raw, crd))...)
			objects = append(objects, rendered{gvk: gvk, name: meta.Metadata.Name, raw: raw})
			continue
		}
		if !scheme.Scheme.Recognizes(gvk) {
			problems = append(problems, fmt.Sprintf("%s: no such kind in %s (Kubernetes' types, or a -crd given)", where, gvk.GroupVersion()))
			continue
		}
		obj, _, err := strict.Decode(data, nil, nil)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", where, err))
			continue
		}
		objects = append(objects, rendered{gvk: gvk, name: meta.Metadata.Name, obj: obj})
	}
	return objects, problems
}

func stripComments(doc []byte) []byte {
	var out bytes.Buffer
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out.Write(line)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

func prefixed(where string, problems []string) []string {
	for i, p := range problems {
		problems[i] = where + ": " + p
	}
	return problems
}

func errorList(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// validateMeta: a name the API takes for the kind, labels and annotations as the API validates them.
func validateMeta(kind string, meta *metav1.ObjectMeta) []string {
	var out []string
	isName := validation.IsDNS1123Subdomain
	if kind == "Service" {
		isName = validation.IsDNS1035Label
	}
	if meta.Name == "" {
		out = append(out, "metadata.name is empty")
	}
	for _, msg := range isName(meta.Name) {
		out = append(out, "metadata.name: "+msg)
	}
	path := field.NewPath("metadata")
	out = append(out, errorList(metavalidation.ValidateLabels(meta.Labels, path.Child("labels")))...)
	out = append(out, errorList(apivalidation.ValidateAnnotations(meta.Annotations, path.Child("annotations")))...)
	return out
}

// validateCustom: unknown fields (those the API server would prune), then the values against the schema.
func validateCustom(raw map[string]interface{}, crd crdSchema) []string {
	var out []string
	pruned := runtime.DeepCopyJSON(raw)
	for _, path := range pruning.PruneWithOptions(pruned, crd.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}) {
		out = append(out, "unknown field "+path)
	}
	result := validate.NewSchemaValidator(crd.openAPI, nil, "", strfmt.Default).Validate(raw)
	for _, err := range result.Errors {
		out = append(out, err.Error())
	}
	return out
}

func crossCheck(objects []rendered) []string {
	var out []string
	deployments := map[string]*appsv1.Deployment{}
	for _, o := range objects {
		if d, ok := o.obj.(*appsv1.Deployment); ok {
			deployments[d.Name] = d
			out = append(out, prefixed("Deployment "+d.Name, checkDeployment(d))...)
		}
	}
	selected := func(sel *metav1.LabelSelector) []*appsv1.Deployment {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil || s.Empty() {
			return nil
		}
		var found []*appsv1.Deployment
		for _, d := range deployments {
			if s.Matches(labels.Set(d.Spec.Template.Labels)) {
				found = append(found, d)
			}
		}
		return found
	}
	for _, o := range objects {
		switch obj := o.obj.(type) {
		case *corev1.Service:
			pods := selected(&metav1.LabelSelector{MatchLabels: obj.Spec.Selector})
			if len(pods) == 0 {
				out = append(out, fmt.Sprintf("Service %s selects no Deployment's pods", obj.Name))
			}
			for _, p := range obj.Spec.Ports {
				for _, d := range pods {
					if p.TargetPort.StrVal != "" && !hasPort(d.Spec.Template.Spec, p.TargetPort.StrVal) {
						out = append(out, fmt.Sprintf("Service %s: targetPort %q is no port of %s's pods", obj.Name, p.TargetPort.StrVal, d.Name))
					}
				}
			}
		case *policyv1.PodDisruptionBudget:
			for _, budget := range []*intstr.IntOrString{obj.Spec.MaxUnavailable, obj.Spec.MinAvailable} {
				if budget != nil && budget.Type == intstr.String && !percent.MatchString(budget.StrVal) {
					out = append(out, fmt.Sprintf("PodDisruptionBudget %s: %q is neither a number nor a percentage", obj.Name, budget.StrVal))
				}
			}
			if n := len(selected(obj.Spec.Selector)); n != 1 {
				out = append(out, fmt.Sprintf("PodDisruptionBudget %s selects the pods of %d Deployments, not 1", obj.Name, n))
			}
		}
		if o.gvk.Kind == "ScaledObject" {
			spec, _ := o.raw["spec"].(map[string]interface{})
			target, _ := spec["scaleTargetRef"].(map[string]interface{})
			name, _ := target["name"].(string)
			if kind, _ := target["kind"].(string); kind != "" && kind != "Deployment" {
				continue
			}
			if deployments[name] == nil {
				out = append(out, fmt.Sprintf("ScaledObject %s scales Deployment %q, which is not in the set", o.name, name))
			} else if deployments[name].Spec.Replicas != nil {
				out = append(out, fmt.Sprintf("ScaledObject %s: Deployment %s sets replicas too (each apply would undo KEDA's)", o.name, name))
			}
		}
	}
	return out
}

func hasPort(pod corev1.PodSpec, name string) bool {
	for _, c := range pod.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

func checkDeployment(d *appsv1.Deployment) []string {
	var out []string
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	switch {
	case err != nil:
		out = append(out, fmt.Sprintf("selector: %v", err))
	case sel.Empty():
		out = append(out, "selector is empty")
	case !sel.Matches(labels.Set(d.Spec.Template.Labels)):
		out = append(out, "selector does not match the pod template's labels")
	}
	pod := d.Spec.Template.Spec
	volumes := map[string]bool{}
	for _, v := range pod.Volumes {
		if volumes[v.Name] {
			out = append(out, fmt.Sprintf("volume %q twice", v.Name))
		}
		volumes[v.Name] = true
	}
	if len(pod.Containers) == 0 {
		out = append(out, "no containers")
	}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		where := "container " + c.Name
		if c.Image == "" {
			out = append(out, where+": no image")
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				out = append(out, fmt.Sprintf("%s mounts %q, which is no volume of the pod", where, m.Name))
			}
		}
		seen := map[string]bool{}
		for _, e := range c.Env {
			for _, msg := range validation.IsEnvVarName(e.Name) {
				out = append(out, fmt.Sprintf("%s: env %q: %s", where, e.Name, msg))
			}
			if seen[e.Name] {
				out = append(out, fmt.Sprintf("%s: env %q twice", where, e.Name))
			}
			seen[e.Name] = true
			if e.Value != "" && e.ValueFrom != nil {
				out = append(out, fmt.Sprintf("%s: env %q has both value and valueFrom", where, e.Name))
			}
		}
		for _, probe := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
			if probe == nil {
				continue
			}
			if h := probe.HTTPGet; h != nil && h.Port.StrVal != "" && !hasPort(corev1.PodSpec{Containers: []corev1.Container{c}}, h.Port.StrVal) {
				out = append(out, fmt.Sprintf("%s: a probe names port %q, which the container does not have", where, h.Port.StrVal))
			}
		}
	}
	return out
}
