package helm

import (
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// serviceAccountDir is where client-go's in-cluster configuration reads
// the token, the CA and the namespace.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// reporterPolicy is the name of the reporter's ValidatingAdmissionPolicy
// and of its binding.
const reporterPolicy = "formspec-reporter-workspace-annotations"

// usernameMatch finds the user a policy's match condition compares with.
var usernameMatch = regexp.MustCompile(`^request\.userInfo\.username == "([^"]+)"$`)

// TestReporterIdentity checks, for every chart release and both kustomize
// installs, that the pods' one Kubernetes identity is the reporter's and
// reaches the reporter alone (the hook server holds no
// Kubernetes credentials): the pods run as the service account the
// formspec-reporter ClusterRoleBinding binds and the admission policy
// matches, in the install's namespace; neither the account nor the pods
// automount a token; one projected volume holds the token, the cluster CA
// and the namespace where client-go looks, mounted by the reporter
// container only; no other container mounts anything there or any
// volume but Secrets; and the reporter's tombstone file is on an emptyDir.
func TestReporterIdentity(t *testing.T) {
	for name, r := range releases {
		if !r.reporterEnabled() {
			continue // TestNoReporter
		}
		t.Run("helm/"+name, func(t *testing.T) {
			checkReporterIdentity(t, render(t, r).objects, r.namespace)
		})
	}
	for _, dir := range []string{"deploy", "deploy/overlays/insecure-http"} {
		t.Run("kustomize/"+dir, func(t *testing.T) {
			checkReporterIdentity(t, kustomizeBuild(t, dir), "formspec-system")
		})
	}
}

// TestNoReporter checks a release with reporter.enabled false: the pods
// run one container, the hook server, with no Kubernetes identity at all
// (no service account named, no token mounted anywhere, nothing
// automounted) and no volume of the reporter's.
func TestNoReporter(t *testing.T) {
	var dep controlplane.Object
	for _, obj := range render(t, releases["NoReporter"]).objects {
		if obj["kind"] == "Deployment" {
			dep = obj
		}
	}
	if dep == nil {
		t.Fatal("no Deployment")
	}
	pod, _ := get(dep, "spec.template.spec").(map[string]any)
	if sa := pod["serviceAccountName"]; sa != nil {
		t.Errorf("the pods run as service account %v, which no longer exists without the reporter", sa)
	}
	if pod["automountServiceAccountToken"] != false {
		t.Errorf("the pods automount the namespace's default token (automountServiceAccountToken %v)", pod["automountServiceAccountToken"])
	}
	containers, _ := pod["containers"].([]any)
	var names []string
	for _, c := range containers {
		names = append(names, str(get(c, "name")))
		mounts, _ := get(c, "volumeMounts").([]any)
		for _, m := range mounts {
			if strings.HasPrefix(str(get(m, "mountPath")), serviceAccountDir) {
				t.Errorf("container %s mounts %s", str(get(c, "name")), str(get(m, "mountPath")))
			}
		}
	}
	if diff := cmp.Diff([]string{"hooks"}, names); diff != "" {
		t.Errorf("containers: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff([]string{"tls", "token"}, sortedFields(pod["volumes"], "name")); diff != "" {
		t.Errorf("volumes: -want, +got:\n%s", diff)
	}
}

func checkReporterIdentity(t *testing.T, objs []controlplane.Object, namespace string) {
	byID := map[string]controlplane.Object{}
	var dep controlplane.Object
	for _, obj := range objs {
		byID[identity(obj)] = obj
		if obj["kind"] == "Deployment" {
			dep = obj
		}
	}
	if dep == nil {
		t.Fatal("no Deployment")
	}
	pod, _ := get(dep, "spec.template.spec").(map[string]any)
	sa := str(pod["serviceAccountName"])
	if sa == "" || sa == "default" {
		t.Fatalf("the pods run as service account %q, not the reporter's", sa)
	}
	if pod["automountServiceAccountToken"] != false {
		t.Errorf("the pod spec automounts a token into every container (automountServiceAccountToken %v)", pod["automountServiceAccountToken"])
	}
	account := byID["ServiceAccount/"+namespace+"/"+sa]
	if account == nil {
		t.Errorf("the pods run as %s/%s, which the install does not create", namespace, sa)
	} else if account["automountServiceAccountToken"] != false {
		t.Errorf("ServiceAccount %s/%s does not set automountServiceAccountToken: false", namespace, sa)
	}

	binding := byID["ClusterRoleBinding/formspec-reporter"]
	if got := str(get(binding, "roleRef.kind")) + "/" + str(get(binding, "roleRef.name")); got != "ClusterRole/formspec-reporter" {
		t.Errorf("ClusterRoleBinding formspec-reporter binds %s, want ClusterRole/formspec-reporter", got)
	}
	wantSubjects := []any{map[string]any{"kind": "ServiceAccount", "name": sa, "namespace": namespace}}
	if diff := cmp.Diff(wantSubjects, get(binding, "subjects")); diff != "" {
		t.Errorf("the reporter's ClusterRoleBinding does not bind the pods' service account: -want, +got:\n%s", diff)
	}
	var users []string
	conditions, _ := get(byID["ValidatingAdmissionPolicy/"+reporterPolicy], "spec.matchConditions").([]any)
	for _, c := range conditions {
		if m := usernameMatch.FindStringSubmatch(str(get(c, "expression"))); m != nil {
			users = append(users, m[1])
		}
	}
	if diff := cmp.Diff([]string{"system:serviceaccount:" + namespace + ":" + sa}, users); diff != "" {
		t.Errorf("users the admission policy %s narrows: -want, +got:\n%s", reporterPolicy, diff)
	}
	vapb := byID["ValidatingAdmissionPolicyBinding/"+reporterPolicy]
	if get(vapb, "spec.policyName") != reporterPolicy || !slices.Contains(asList(get(vapb, "spec.validationActions")), "Deny") {
		t.Errorf("the policy binding does not enforce %s with Deny: %v", reporterPolicy, get(vapb, "spec"))
	}

	// Which volumes hold what.
	var tokenVolumes []string
	secretVolumes := map[string]bool{}
	emptyDirs := map[string]bool{}
	vols, _ := pod["volumes"].([]any)
	for _, v := range vols {
		name := str(get(v, "name"))
		switch {
		case get(v, "secret") != nil:
			secretVolumes[name] = true
		case get(v, "emptyDir") != nil:
			emptyDirs[name] = true
		case get(v, "projected") != nil:
			sources, _ := get(v, "projected.sources").([]any)
			var files []string
			for _, src := range sources {
				switch {
				case get(src, "serviceAccountToken") != nil:
					tokenVolumes = append(tokenVolumes, name)
					files = append(files, str(get(src, "serviceAccountToken.path")))
				case get(src, "configMap.name") == "kube-root-ca.crt":
					for _, it := range asItems(get(src, "configMap.items")) {
						files = append(files, str(get(it, "key"))+">"+str(get(it, "path")))
					}
				case get(src, "downwardAPI") != nil:
					for _, it := range asItems(get(src, "downwardAPI.items")) {
						files = append(files, str(get(it, "fieldRef.fieldPath"))+">"+str(get(it, "path")))
					}
				}
			}
			sort.Strings(files)
			if diff := cmp.Diff([]string{"ca.crt>ca.crt", "metadata.namespace>namespace", "token"}, files); diff != "" {
				t.Errorf("projected volume %s does not hold what client-go reads: -want, +got:\n%s", name, diff)
			}
		}
	}
	if len(tokenVolumes) != 1 {
		t.Fatalf("volumes with a service-account token: %v, want one", tokenVolumes)
	}

	containers := append(asItems(pod["initContainers"]), asItems(pod["containers"])...)
	var reporter any
	for _, c := range containers {
		cname := str(get(c, "name"))
		if cname == "reporter" {
			reporter = c
		}
		for _, m := range asItems(get(c, "volumeMounts")) {
			vol, at := str(get(m, "name")), path.Clean(str(get(m, "mountPath")))
			switch {
			case cname == "reporter" && vol == tokenVolumes[0]:
				if at != serviceAccountDir || get(m, "readOnly") != true {
					t.Errorf("the reporter mounts its token at %s (readOnly %v), want %s read-only", at, get(m, "readOnly"), serviceAccountDir)
				}
			case vol == tokenVolumes[0]:
				t.Errorf("container %s mounts the service-account token (volume %s at %s)", cname, vol, at)
			case strings.HasPrefix(at+"/", "/var/run/secrets/kubernetes.io/"):
				t.Errorf("container %s mounts volume %s at %s, where client-go looks for credentials", cname, vol, at)
			case cname != "reporter" && !secretVolumes[vol]:
				t.Errorf("container %s mounts volume %s, which is not one of the install's Secrets", cname, vol)
			}
		}
	}
	if reporter == nil {
		t.Fatal("no container named reporter")
	}
	if !slices.ContainsFunc(asItems(get(reporter, "volumeMounts")), func(m any) bool {
		return get(m, "name") == tokenVolumes[0] && path.Clean(str(get(m, "mountPath"))) == serviceAccountDir
	}) {
		t.Errorf("the reporter does not mount its token at %s", serviceAccountDir)
	}

	args, _ := get(reporter, "args").([]any)
	file := flag(args, "tombstone-file")
	if file == "" {
		t.Fatal("the reporter has no --tombstone-file: deletions are lost when its container restarts")
	}
	var onEmptyDir bool
	for _, m := range asItems(get(reporter, "volumeMounts")) {
		if path.Dir(file) == path.Clean(str(get(m, "mountPath"))) {
			onEmptyDir = emptyDirs[str(get(m, "name"))] && get(m, "readOnly") != true
		}
	}
	if !onEmptyDir {
		t.Errorf("--tombstone-file=%s is not in a writable emptyDir mount of the reporter", file)
	}
}

// asItems is a decoded YAML list, or nil.
func asItems(v any) []any {
	l, _ := v.([]any)
	return l
}

// asList is a decoded YAML list of scalars, formatted.
func asList(v any) []string {
	var out []string
	for _, e := range asItems(v) {
		out = append(out, str(e))
	}
	return out
}
