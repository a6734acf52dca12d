package integration

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// docFiles are the files whose kubectl commands a user copies: the README,
// every page under docs/ and the chart's NOTES.txt.
func docFiles(t testing.TB) []string {
	t.Helper()
	root := controlplane.RepoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{
		filepath.Join(root, "README.md"),
		filepath.Join(root, "deploy", "helm", "formspec-hooks", "templates", "NOTES.txt"),
	}, files...)
}

// resourceUse is one resource name typed in a kubectl command of the docs.
type resourceUse struct {
	name  string // as typed: "ws", "resourceclaims.formspec.dev", "deployment"
	where string // file:line
	verb  string // the kubectl subcommand
}

// testKubectlNames resolves every resource name the docs' kubectl commands
// use against the API server's discovery (with the formspec.dev and
// Metacontroller CRDs installed, on Kubernetes 1.37 with all its built-in
// groups), the way kubectl resolves it, and fails when a name does not
// resolve or resolves ambiguously. A bare `resourceclaim` is the case in
// point: it is the singular of both resource.k8s.io's ResourceClaims
// (Dynamic Resource Allocation) and ours, and kubectl silently picks
// Kubernetes' own.
func testKubectlNames(t *testing.T, c *controlplane.Client) {
	lists, err := c.Discovery()
	if err != nil {
		t.Fatal(err)
	}
	d := newDiscovery(lists)
	var uses []resourceUse
	for _, f := range docFiles(t) {
		uses = append(uses, kubectlResourceUses(t, f)...)
	}
	if len(uses) < 10 {
		t.Fatalf("found only %d resource names in the docs' kubectl commands; is the extraction broken?", len(uses))
	}
	for _, u := range uses {
		if problem := d.check(u.name); problem != "" {
			t.Errorf("%s: kubectl %s %s: %s", u.where, u.verb, u.name, problem)
		}
	}
	// The formspec category must stay exactly our four kinds.
	got := d.categories["formspec"]
	want := []schema.GroupResource{
		{Group: v1alpha1.Group, Resource: "clusterclasses"},
		{Group: v1alpha1.Group, Resource: "datastores"},
		{Group: v1alpha1.Group, Resource: "resourceclaims"},
		{Group: v1alpha1.Group, Resource: "workspaces"},
	}
	slices.SortFunc(got, func(a, b schema.GroupResource) int { return strings.Compare(a.String(), b.String()) })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kubectl get formspec: -want, +got:\n%s", diff)
	}
}

// ownGroups are the API groups this install serves or relies on: a name of
// the docs that can mean one of their resources must mean nothing else.
var ownGroups = map[string]bool{v1alpha1.Group: true, "metacontroller.k8s.io": true}

// discovery indexes what kubectl's RESTMapper and expanders see.
type discovery struct {
	// names maps plural and singular names, and lower-case kinds, to the
	// resources they name, in discovery (kubectl priority) order.
	names map[string][]schema.GroupResource
	// shortNames maps short names to resources.
	shortNames map[string][]schema.GroupResource
	// categories maps categories to their member resources.
	categories map[string][]schema.GroupResource
}

func newDiscovery(lists []metav1.APIResourceList) *discovery {
	d := &discovery{names: map[string][]schema.GroupResource{}, shortNames: map[string][]schema.GroupResource{}, categories: map[string][]schema.GroupResource{}}
	add := func(m map[string][]schema.GroupResource, key string, gr schema.GroupResource) {
		if key != "" && !slices.Contains(m[key], gr) {
			m[key] = append(m[key], gr)
		}
	}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") { // a subresource
				continue
			}
			gr := schema.GroupResource{Group: gv.Group, Resource: r.Name}
			add(d.names, r.Name, gr)
			add(d.names, r.SingularName, gr)
			add(d.names, strings.ToLower(r.Kind), gr)
			for _, s := range r.ShortNames {
				add(d.shortNames, s, gr)
			}
			for _, c := range r.Categories {
				add(d.categories, c, gr)
			}
		}
	}
	return d
}

// check resolves typed as kubectl does and returns what is wrong with it,
// or "". kubectl expands a category first (get, describe, delete), then
// takes an exact plural or singular name (or kind), choosing the highest
// priority group when several match, then a short name; "name.group"
// restricts the match to that group.
func (d *discovery) check(typed string) string {
	name, group, qualified := strings.Cut(strings.ToLower(typed), ".")
	filter := func(grs []schema.GroupResource) []schema.GroupResource {
		if !qualified {
			return grs
		}
		var out []schema.GroupResource
		for _, gr := range grs {
			if gr.Group == group {
				out = append(out, gr)
			}
		}
		return out
	}
	byName, byShort := filter(d.names[name]), filter(d.shortNames[name])
	var byCategory []schema.GroupResource
	if !qualified {
		byCategory = d.categories[name]
	}
	// Every resource the typed name could stand for, however kubectl gets
	// there: a category shadows a name, a name shadows a short name, and
	// a name in a higher priority group shadows ours, all silently.
	var all []schema.GroupResource
	for _, gr := range slices.Concat(byName, byShort) {
		if !slices.Contains(all, gr) {
			all = append(all, gr)
		}
	}
	switch {
	case len(byCategory) > 0 && len(all) > 0:
		return fmt.Sprintf("is both the category of %v and the name of %v", byCategory, all)
	case len(byCategory) > 0:
		return ""
	case len(all) == 0:
		return "no served resource has this name, short name or category"
	case len(all) == 1:
		return ""
	}
	for _, gr := range all {
		if ownGroups[gr.Group] {
			return fmt.Sprintf("is ambiguous: it names %v, and kubectl picks %v; use a short name or name.group", all, all[0])
		}
	}
	// Kubernetes' own duplicates (events in v1 and events.k8s.io) are the
	// same objects under two APIs.
	return ""
}

// kubectlCommand finds "kubectl ..." up to the end of a shell command.
var kubectlCommand = regexp.MustCompile(`(?:^|[\s$(` + "`" + `])kubectl\s+([^|;&)` + "`" + `#]*)`)

// kubectlResourceUses extracts the resource names from the kubectl
// commands in a file: every line of fenced code blocks and every inline
// code span of prose. Template actions ({{ ... }}) become a placeholder
// name.
func kubectlResourceUses(t testing.TB, path string) []resourceUse {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rel, _ := filepath.Rel(controlplane.RepoRoot(t), path)
	markdown := strings.HasSuffix(path, ".md")
	template := regexp.MustCompile(`\{\{[^}]*\}\}`)
	inline := regexp.MustCompile("`([^`]*kubectl [^`]*)`")
	var uses []resourceUse
	inFence, continued, start := !markdown, "", 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := template.ReplaceAllString(sc.Text(), "x")
		if markdown && strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		var texts []string
		switch {
		case inFence:
			if continued == "" {
				start = n
			}
			if s, ok := strings.CutSuffix(line, `\`); ok {
				continued += s + " "
				continue
			}
			texts, continued = []string{continued + line}, ""
		default:
			start = n
			for _, m := range inline.FindAllStringSubmatch(line, -1) {
				texts = append(texts, m[1])
			}
		}
		for _, text := range texts {
			for _, m := range kubectlCommand.FindAllStringSubmatch(text, -1) {
				verb, names := resourceArgs(strings.Fields(m[1]))
				for _, name := range names {
					uses = append(uses, resourceUse{name: name, where: fmt.Sprintf("%s:%d", rel, start), verb: verb})
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return uses
}

// valueFlags are the kubectl flags that take a separate value.
var valueFlags = map[string]bool{
	"-n": true, "--namespace": true, "-o": true, "--output": true, "-l": true, "--selector": true,
	"-f": true, "--filename": true, "-k": true, "--kustomize": true, "-c": true, "--container": true,
	"--field-selector": true, "--sort-by": true, "-p": true, "--patch": true, "--type": true,
	"--timeout": true, "--since": true, "--tail": true, "-L": true, "--label-columns": true,
	"--for": true, "--context": true, "--kubeconfig": true, "--api-version": true,
	"--from-file": true, "--from-literal": true, "--subresource": true, "--field-manager": true,
	"--replicas": true, "--image": true, "--raw": true,
}

// resourceArgs returns the kubectl subcommand of args (the words after
// "kubectl") and the resource names it is given.
func resourceArgs(args []string) (verb string, names []string) {
	var positional []string
	var eventsFor string
	for i := 0; i < len(args); i++ {
		a := strings.Trim(args[i], `"'`)
		switch {
		case strings.HasPrefix(a, "-"):
			flag, value, hasValue := strings.Cut(a, "=")
			if !hasValue && valueFlags[flag] && i+1 < len(args) {
				i++
				value = args[i]
			}
			if flag == "--for" {
				eventsFor = value
			}
		case strings.HasPrefix(a, "$"):
			// A shell variable (a loop over `-o name`) names what the
			// command that set it listed, which is checked there.
		default:
			positional = append(positional, a)
		}
	}
	if len(positional) == 0 {
		return "", nil
	}
	verb, rest := positional[0], positional[1:]
	typeOf := func(arg string) string {
		kind, _, _ := strings.Cut(arg, "/")
		return kind
	}
	switch verb {
	case "get", "describe", "delete", "edit", "patch", "label", "annotate", "scale", "wait":
		if len(rest) == 0 {
			return verb, nil
		}
		if !strings.Contains(rest[0], "/") {
			return verb, strings.Split(rest[0], ",")
		}
		for _, r := range rest {
			names = append(names, typeOf(r))
		}
		return verb, names
	case "explain":
		if len(rest) > 0 {
			kind, _, _ := strings.Cut(rest[0], ".") // explain takes resource.field.path
			return verb, []string{kind}
		}
	case "rollout":
		if len(rest) > 1 {
			return verb, []string{typeOf(rest[1])}
		}
	case "logs", "port-forward":
		if len(rest) > 0 && strings.Contains(rest[0], "/") {
			return verb, []string{typeOf(rest[0])}
		}
	case "events":
		if eventsFor != "" {
			return verb, []string{typeOf(eventsFor)}
		}
	case "formspec":
		// The kubectl plugin: trace resolves its KIND as kubectl does.
		if len(rest) > 1 && rest[0] == "trace" {
			return verb, []string{typeOf(rest[1])}
		}
	}
	return verb, nil
}

// TestKubectlResourceArgs pins the extraction the API server test relies
// on, so that a docs command it cannot read fails here rather than being
// skipped silently there.
func TestKubectlResourceArgs(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   string
		want   []string
	}{
		"Get":                 {reason: "A type and a name.", args: "-n team-a get rclaim shop-orders", want: []string{"rclaim"}},
		"List":                {reason: "A comma list of types.", args: "get compositecontrollers,decoratorcontrollers -l a=b", want: []string{"compositecontrollers", "decoratorcontrollers"}},
		"Slash":               {reason: "type/name arguments.", args: "describe workspace/shop deployment/shop", want: []string{"workspace", "deployment"}},
		"Output":              {reason: "Flag values are not resources.", args: "get -o jsonpath={.status} --namespace x ws shop", want: []string{"ws"}},
		"Explain":             {reason: "explain takes resource.field.path.", args: "explain rclaim.spec.signature", want: []string{"rclaim"}},
		"Rollout":             {reason: "rollout has a sub-verb.", args: "-n formspec-system rollout status deployment/formspec-hooks", want: []string{"deployment"}},
		"Logs":                {reason: "logs of a workload.", args: "-n metacontroller logs statefulset/metacontroller --since 10m", want: []string{"statefulset"}},
		"LogsPod":             {reason: "A bare pod name is not a resource type.", args: "logs metacontroller-0"},
		"Events":              {reason: "events --for kind/name.", args: "events -n team-a --for workspace/shop", want: []string{"workspace"}},
		"WaitFor":             {reason: "wait --for is a condition.", args: "wait --for=condition=Ready ws/shop", want: []string{"ws"}},
		"Apply":               {reason: "apply names files, not resources.", args: "apply -f secret.yaml -k deploy/"},
		"Qualified":           {reason: "name.group stays whole for get.", args: "get resourceclaims.formspec.dev -A", want: []string{"resourceclaims.formspec.dev"}},
		"CreateNone":          {reason: "create secret is not checked.", args: "create secret generic x --from-file=token=./token"},
		"PluginTrace":         {reason: "The plugin's trace takes KIND/NAME.", args: "formspec trace rclaim/shop-orders -n team-a", want: []string{"rclaim"}},
		"PluginTraceTypeName": {reason: "Or KIND NAME.", args: "formspec trace -o wide ws shop", want: []string{"ws"}},
		"PluginDiff":          {reason: "diff names no resource.", args: "formspec diff -A --exit-code"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, got := resourceArgs(strings.Fields(tc.args))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nresourceArgs(%q): -want, +got:\n%s", tc.reason, tc.args, diff)
			}
		})
	}
}

// TestDiscoveryCheck pins the resolution rules on a discovery shaped like
// Kubernetes 1.37's with our CRDs.
func TestDiscoveryCheck(t *testing.T) {
	d := newDiscovery([]metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "events", SingularName: "event", Kind: "Event", ShortNames: []string{"ev"}},
			{Name: "pods", SingularName: "pod", Kind: "Pod", ShortNames: []string{"po"}, Categories: []string{"all"}},
		}},
		{GroupVersion: "events.k8s.io/v1", APIResources: []metav1.APIResource{
			{Name: "events", SingularName: "event", Kind: "Event", ShortNames: []string{"ev"}},
		}},
		{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{
			{Name: "resourceclaims", SingularName: "resourceclaim", Kind: "ResourceClaim"},
		}},
		{GroupVersion: "formspec.dev/v1alpha1", APIResources: []metav1.APIResource{
			{Name: "resourceclaims", SingularName: "resourceclaim", Kind: "ResourceClaim", ShortNames: []string{"rclaim"}, Categories: []string{"formspec"}},
			{Name: "workspaces", SingularName: "workspace", Kind: "Workspace", ShortNames: []string{"ws"}, Categories: []string{"formspec"}},
		}},
	})
	cases := map[string]struct {
		reason string
		typed  string
		ok     bool
	}{
		"ShortName":         {reason: "Our short name is unique.", typed: "rclaim", ok: true},
		"Singular":          {reason: "The bare singular collides with Dynamic Resource Allocation.", typed: "resourceclaim"},
		"Plural":            {reason: "So does the plural.", typed: "resourceclaims"},
		"Qualified":         {reason: "name.group is exact.", typed: "resourceclaims.formspec.dev", ok: true},
		"Kind":              {reason: "A kind in any case resolves like its singular.", typed: "Workspace", ok: true},
		"Category":          {reason: "A category of ours.", typed: "formspec", ok: true},
		"BuiltinDuplicate":  {reason: "Kubernetes' own events under two APIs are not our concern.", typed: "events", ok: true},
		"Unknown":           {reason: "A typo does not resolve.", typed: "workspacez"},
		"QualifiedNotThere": {reason: "A group that does not serve the name.", typed: "workspaces.apps"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			problem := d.check(tc.typed)
			if (problem == "") != tc.ok {
				t.Errorf("%s\ncheck(%q) = %q, want ok: %v", tc.reason, tc.typed, problem, tc.ok)
			}
		})
	}
}

// testPrinterColumns reads a Workspace the way `kubectl get ws` prints it:
// the server-side table with the CRD's printer columns, where Reason is
// the Degraded condition's reason (docs/troubleshooting.md starts there).
func testPrinterColumns(t *testing.T, c *controlplane.Client) {
	ensureNamespace(t, c, "columns")
	ws := jsonCopy(t, fullWorkspace()).(map[string]any)
	ws = with(t, ws, fields{"metadata": map[string]any{"name": "shop", "namespace": "columns"}})
	if _, err := c.Create(ws); err != nil {
		t.Fatalf("cannot create the Workspace: %v", err)
	}
	at := metav1.Now().Rfc3339Copy()
	status := jsonCopy(t, v1alpha1.WorkspaceStatus{
		ObservedGeneration: 1,
		Phase:              v1alpha1.PhaseDegraded,
		Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionTrue, LastTransitionTime: at, Reason: "ReplicasAvailable", Message: "2 of 2 replicas available"},
			{Type: "Progressing", Status: metav1.ConditionFalse, LastTransitionTime: at, Reason: "RolloutComplete", Message: "done"},
			{Type: "Degraded", Status: metav1.ConditionTrue, LastTransitionTime: at, Reason: "ClusterClassNotFound", Message: "ClusterClass \"gone\" not found"},
		},
		Replicas: 2, ReadyReplicas: 2,
	})
	ws["status"] = status
	if _, err := c.MergePatch(v1alpha1.APIVersion, "Workspace", "columns", "shop", "status", map[string]any{"status": status}); err != nil {
		t.Fatalf("cannot write the status: %v", err)
	}
	table, err := c.Table("/apis/formspec.dev/v1alpha1/namespaces/columns/workspaces/shop")
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("table has %d rows, want 1", len(table.Rows))
	}
	got := map[string]any{}
	for i, col := range table.ColumnDefinitions {
		if col.Priority == 0 && col.Name != "Age" {
			got[col.Name] = table.Rows[0].Cells[i]
		}
	}
	want := map[string]any{
		"Name": "shop", "Class": fullWorkspace().Spec.ClusterClass, "Phase": "Degraded",
		"Ready": float64(2), "Replicas": float64(2), "Reason": "ClusterClassNotFound",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kubectl get ws columns: -want, +got:\n%s", diff)
	}
}
