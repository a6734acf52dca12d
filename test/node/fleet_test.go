package node

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
)

// The environment of the fault and upgrade suites (docs/testing.md). Both
// need root and METACONTROLLER_BIN, like the rest of test/node, and run
// only when their make target asks: they take minutes, and make test-node
// runs everything else.
const (
	// EnvFaults set to 1 runs TestFaults (make test-faults).
	EnvFaults = "FORMSPEC_FAULTS"
	// EnvUpgrade set to 1 runs TestUpgrade (make test-upgrade).
	EnvUpgrade = "FORMSPEC_UPGRADE"
	// EnvFleetWorkspaces is how many Workspaces the suites drive (default
	// defaultFleetSize); fewer make a quicker run while developing.
	EnvFleetWorkspaces = "FORMSPEC_FLEET_WORKSPACES"
)

// defaultFleetSize is the documented size of the suites' fleet.
const defaultFleetSize = 50

// requireSuite skips the test unless env is 1 (what make target sets) and
// METACONTROLLER_BIN names Metacontroller, saying why, and checks the
// cluster's prerequisites; it returns METACONTROLLER_BIN.
func requireSuite(t *testing.T, env, target string) string {
	t.Helper()
	if os.Getenv(env) != "1" {
		t.Skipf("%s is not 1: `make %s` runs this suite, which takes several minutes; see docs/testing.md", env, target)
	}
	mcBin := os.Getenv(EnvMetacontrollerBin)
	if mcBin == "" {
		t.Skip(EnvMetacontrollerBin + " not set: the suite runs Metacontroller in a pod; see docs/testing.md")
	}
	RequirePrerequisites(t)
	return mcBin
}

// fleetSize is EnvFleetWorkspaces, or defaultFleetSize.
func fleetSize(t *testing.T) int {
	t.Helper()
	v := os.Getenv(EnvFleetWorkspaces)
	if v == "" {
		return defaultFleetSize
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < len(fleetClasses) {
		t.Fatalf("%s=%q: want a whole number of at least %d (one workspace per class)", EnvFleetWorkspaces, v, len(fleetClasses))
	}
	return n
}

// fleetClasses are the class shapes every fleet has one of each four
// workspaces in: plain, scale-to-zero, auto-scaling under an HPA, and two
// replicas under a PodDisruptionBudget.
var fleetClasses = []*v1alpha1.ClusterClass{
	fleetClass("fleet-plain", v1alpha1.Scaling{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](1)}),
	fleetClass("fleet-zero", v1alpha1.Scaling{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](1), ScaleToZero: true}),
	fleetClass("fleet-hpa", v1alpha1.Scaling{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](3)}, v1alpha1.FeatureAutoScaling),
	fleetClass("fleet-pdb", v1alpha1.Scaling{MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](2)}),
}

func fleetClass(name string, s v1alpha1.Scaling, features ...string) *v1alpha1.ClusterClass {
	return &v1alpha1.ClusterClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "ClusterClass"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.ClusterClassSpec{SLA: "99.9", Scaling: s, Features: features},
	}
}

// The fleet's Datastore, one per namespace, and the prefix of the
// credentials in the workspaces' environment.
const (
	fleetDatastore = "orders-db"
	fleetEndpoint  = "orders-db-endpoint"
	fleetEnvPrefix = "ORDERS_"
	// fleetTouch is the annotation the driver bumps: a change to the
	// Workspace that makes Metacontroller sync it and leaves its children
	// as they are.
	fleetTouch = "formspec.test/touch"
)

// fleet is a one-node cluster with the hooks, Cluster Control,
// Metacontroller in a pod, and many Workspaces of every class shape, each
// with a granted claim, watched from the start.
type fleet struct {
	c     *Cluster
	tm    *Timings
	admin string
	helm  *helmRelease
	// chart is the chart the release runs now.
	chart       string
	phases      *phaseMonitor
	replicaSets *replicaSetMonitor
	// resync is the workspace controller's resync period, as installed.
	resync time.Duration

	mu         sync.Mutex
	workspaces map[string]*fleetWorkspace
	// restarts are when the API server was restarted: from the stop to
	// shortly after it was ready again.
	restarts   [][2]time.Time
	namespaces []string
	next       int
}

// fleetWorkspace is one Workspace of the fleet, with its claim.
type fleetWorkspace struct {
	ns, name, class string
	// idle: annotated formspec.dev/idle (scale-to-zero class only).
	idle bool
	// defaultVersion: no spec.version, so it runs the install's
	// defaultVersion.
	defaultVersion bool
}

func (w *fleetWorkspace) key() string { return w.ns + "/" + w.name }

// claim is the workspace's ResourceClaim, whose Secret is claim()+"-credentials".
func (w *fleetWorkspace) claim() string { return w.name + "-orders" }

// steady is the phase the workspace settles in.
func (w *fleetWorkspace) steady() string {
	if w.idle {
		return v1alpha1.PhaseIdle
	}
	return v1alpha1.PhaseReady
}

// password is the endpoint password of a namespace's Datastore.
func fleetPassword(ns string) string { return "fleet-password-" + ns }

// create adds n workspaces to the fleet, with their namespaces,
// Datastores and claims: workspace i of class i mod 4, ten to a
// namespace, every other scale-to-zero one idle, every third on the
// install's default version.
func (f *fleet) create(t *testing.T, n int) []*fleetWorkspace {
	t.Helper()
	for _, cls := range fleetClasses {
		f.c.apply(t, cls)
	}
	var added []*fleetWorkspace
	for range n {
		f.mu.Lock()
		i := f.next
		f.next++
		w := &fleetWorkspace{ns: fmt.Sprintf("fleet-%d", i/10), name: fmt.Sprintf("ws-%03d", i), class: fleetClasses[i%len(fleetClasses)].Name}
		w.idle = i%len(fleetClasses) == 1 && (i/len(fleetClasses))%2 == 0
		w.defaultVersion = i%3 == 0
		newNS := !slices.Contains(f.namespaces, w.ns)
		if newNS {
			f.namespaces = append(f.namespaces, w.ns)
		}
		f.workspaces[w.key()] = w
		f.mu.Unlock()
		if newNS {
			f.createNamespace(t, w.ns)
		}
		f.c.apply(t, fleetClaim(w, claimstest.Owner))
		f.c.apply(t, w.object())
		added = append(added, w)
	}
	return added
}

// createNamespace makes a fleet namespace with its Datastore and the
// labelled endpoint Secret it validates against.
func (f *fleet) createNamespace(t *testing.T, ns string) {
	t.Helper()
	f.c.apply(t, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}})
	f.c.apply(t, fleetEndpointSecret(ns))
	f.c.apply(t, &v1alpha1.Datastore{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "Datastore"},
		ObjectMeta: metav1.ObjectMeta{Name: fleetDatastore, Namespace: ns},
		Spec: v1alpha1.DatastoreSpec{
			Driver:            v1alpha1.DriverPostgres,
			EndpointSecretRef: v1alpha1.SecretRef{Name: fleetEndpoint},
			AllowedTenants:    []string{ns + "/*"},
			Owner:             "data-team@example.com",
			OwnerPublicKey:    claimstest.PublicHex(claimstest.Owner),
		},
	})
}

// fleetEndpointSecret is a namespace's Datastore endpoint Secret.
func fleetEndpointSecret(ns string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: fleetEndpoint, Namespace: ns, Labels: map[string]string{v1alpha1.LabelDatastore: fleetDatastore}},
		StringData: map[string]string{"host": "orders-db." + ns + ".svc", "port": "5432", "database": "orders", "username": "orders", "password": fleetPassword(ns)},
	}
}

// fleetClaim is the workspace's claim on its namespace's Datastore, signed
// with key a minute ago by the real clock (which the hook checks).
func fleetClaim(w *fleetWorkspace, key ed25519.PrivateKey) *v1alpha1.ResourceClaim {
	c := &v1alpha1.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: w.claim(), Namespace: w.ns},
		Spec: v1alpha1.ResourceClaimSpec{
			Datastore:        v1alpha1.DatastoreClaimRef{Name: fleetDatastore},
			Workspace:        w.name,
			Permission:       v1alpha1.PermissionRead,
			GrantedBy:        "data-team@example.com",
			GrantedAt:        time.Now().UTC().Add(-time.Minute).Truncate(time.Second).Format(time.RFC3339),
			SignatureVersion: v1alpha1.SignatureV2,
		},
	}
	return claimstest.SignClaim(c, key)
}

// object is the workspace's Workspace.
func (w *fleetWorkspace) object() *v1alpha1.Workspace {
	ws := standInWorkspace(w.ns, w.name, w.class)
	if w.defaultVersion {
		ws.Spec.Version = ""
	}
	ws.Spec.Datastores = []v1alpha1.DatastoreRef{{Name: fleetDatastore, EnvPrefix: fleetEnvPrefix}}
	if w.idle {
		ws.Annotations = map[string]string{v1alpha1.AnnotationIdle: "true"}
	}
	return ws
}

// members returns the fleet's workspaces, sorted by key.
func (f *fleet) members() []*fleetWorkspace {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*fleetWorkspace
	for _, k := range slices.Sorted(maps.Keys(f.workspaces)) {
		out = append(out, f.workspaces[k])
	}
	return out
}

// steady is the phase each workspace of the fleet settles in, by key.
func (f *fleet) steady() map[string]string {
	out := map[string]string{}
	for _, w := range f.members() {
		out[w.key()] = w.steady()
	}
	return out
}

// restartAPIServer restarts kube-apiserver under the fleet, and returns
// how long it was gone.
func (f *fleet) restartAPIServer(t *testing.T) time.Duration {
	t.Helper()
	stopped := time.Now()
	gone := f.c.RestartAPIServer(t)
	f.mu.Lock()
	defer f.mu.Unlock()
	// Metacontroller's log has whole seconds; its clients reconnect
	// before /readyz passes.
	f.restarts = append(f.restarts, [2]time.Time{stopped.Add(-time.Second), time.Now().Add(5 * time.Second)})
	return gone
}

// apiServerDown reports whether a time falls into an API server restart.
func (f *fleet) apiServerDown(at time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.restarts {
		if !at.Before(r[0]) && !at.After(r[1]) {
			return true
		}
	}
	return false
}

// forget removes workspaces from the fleet (once deleted).
func (f *fleet) forget(ws ...*fleetWorkspace) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range ws {
		delete(f.workspaces, w.key())
	}
}

// observedWorkspace is what the convergence check reads of a Workspace.
type observedWorkspace struct {
	Metadata metav1.ObjectMeta        `json:"metadata"`
	Status   v1alpha1.WorkspaceStatus `json:"status"`
}

// listWorkspaces returns every Workspace of the fleet's namespaces, by key.
func (f *fleet) listWorkspaces() (map[string]observedWorkspace, error) {
	raw, err := f.c.Client().Do("GET", "/apis/"+v1alpha1.APIVersion+"/workspaces", nil)
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []observedWorkspace `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, err
	}
	out := map[string]observedWorkspace{}
	for _, ws := range list.Items {
		if strings.HasPrefix(ws.Metadata.Namespace, "fleet-") {
			out[ws.Metadata.Namespace+"/"+ws.Metadata.Name] = ws
		}
	}
	return out, nil
}

// unconverged says what keeps the fleet from being converged, or nothing:
// every workspace synced at its generation, in its steady phase, its claim
// injected, and Cluster Control told of that phase (and of the deletion
// of each workspace that is gone).
func (f *fleet) unconverged() []string {
	listed, err := f.listWorkspaces()
	if err != nil {
		return []string{err.Error()}
	}
	st, err := clusterControlState(f.admin)
	if err != nil {
		return []string{"Cluster Control: " + err.Error()}
	}
	var out []string
	members := f.members()
	for _, w := range members {
		ws, ok := listed[w.key()]
		switch {
		case !ok:
			out = append(out, w.key()+": no Workspace")
			continue
		case ws.Status.ObservedGeneration != ws.Metadata.Generation:
			out = append(out, fmt.Sprintf("%s: status of generation %d, not %d", w.key(), ws.Status.ObservedGeneration, ws.Metadata.Generation))
		case ws.Status.Phase != w.steady():
			out = append(out, fmt.Sprintf("%s: %s, not %s", w.key(), ws.Status.Phase, w.steady()))
		case len(ws.Status.Datastores) != 1 || ws.Status.Datastores[0].State != v1alpha1.DatastoreInjected:
			out = append(out, fmt.Sprintf("%s: datastores %+v", w.key(), ws.Status.Datastores))
		}
		if rep, ok := st.Workspaces[w.key()]; !ok || rep.Deleted || rep.Status == nil || rep.Status.Phase != w.steady() {
			out = append(out, fmt.Sprintf("%s: Cluster Control has %s", w.key(), describeReport(rep, ok)))
		}
	}
	for key, ws := range listed {
		if !slices.ContainsFunc(members, func(w *fleetWorkspace) bool { return w.key() == key }) {
			out = append(out, fmt.Sprintf("%s: still there (%s)", key, ws.Status.Phase))
		}
	}
	slices.Sort(out)
	return out
}

// describeReport says what Cluster Control holds for a workspace.
func describeReport(rep ccapi.WorkspaceStatusReport, ok bool) string {
	switch {
	case !ok:
		return "no report"
	case rep.Deleted:
		return "its deletion"
	case rep.Status == nil:
		return "a report without status"
	}
	return "phase " + rep.Status.Phase
}

// waitConverged waits until unconverged says nothing, for at most limit,
// and returns how long that took.
func (f *fleet) waitConverged(t *testing.T, what string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last []string
	for time.Since(start) < limit {
		if last = f.unconverged(); len(last) == 0 {
			return time.Since(start)
		}
		time.Sleep(time.Second)
	}
	if len(last) > 10 {
		last = append(last[:10], fmt.Sprintf("... and %d more", len(last)-10))
	}
	t.Fatalf("%s: the fleet did not converge within %v:\n%s", what, limit, strings.Join(last, "\n"))
	return 0
}

// drive makes Metacontroller sync the fleet's workspaces all along, as a
// busy cluster does: it bumps fleetTouch on one workspace after another,
// every period, until ctx ends. A touch changes nothing the hooks render.
// It returns how many touches were made and how many failed (the API
// server down) once ctx ends; it may be called more than once.
func (f *fleet) drive(ctx context.Context, period time.Duration) func() (touched, failed int64) {
	var ok, bad atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			members := f.members()
			if len(members) == 0 {
				continue
			}
			w := members[i%len(members)]
			_, err := f.c.Client().MergePatch(v1alpha1.APIVersion, "Workspace", w.ns, w.name, "",
				map[string]any{"metadata": map[string]any{"annotations": map[string]any{fleetTouch: strconv.Itoa(i)}}})
			if err != nil {
				bad.Add(1)
			} else {
				ok.Add(1)
			}
		}
	}()
	return func() (int64, int64) { <-done; return ok.Load(), bad.Load() }
}

// resyncPeriod reads resyncPeriodSeconds of one of the chart's
// controllers, named by its template in templates/controllers
// ("workspace", "resourceclaim"), from the chart as installed with its
// default values: the number the template holds or, where the template
// takes it from a value (<controller>ResyncPeriodSeconds, as
// workspaceResyncPeriodSeconds since that value came), the value's
// default.
func resyncPeriod(t *testing.T, chart, controller string) time.Duration {
	t.Helper()
	read := func(file, pattern string) []byte {
		b, err := os.ReadFile(filepath.Join(chart, file))
		if err != nil {
			t.Fatal(err)
		}
		if m := regexp.MustCompile(pattern).FindSubmatch(b); m != nil {
			return m[1]
		}
		return nil
	}
	template := filepath.Join("templates", "controllers", controller+".yaml")
	v := read(template, `(?m)^\s*resyncPeriodSeconds:\s*(\d+)\s*$`)
	if v == nil {
		v = read("values.yaml", `(?m)^`+controller+`ResyncPeriodSeconds:\s*(\d+)\s*$`)
	}
	if v == nil {
		t.Fatalf("%s: neither %s nor values.yaml holds the %s controller's resync period", chart, template, controller)
	}
	s, _ := strconv.Atoi(string(v))
	return time.Duration(s) * time.Second
}

// waitRolledOut waits until a Deployment's rollout is over: its controller
// has seen the latest spec, every replica is updated and ready, and no
// pod of an older template is left, terminating ones included.
func (c *Cluster) waitRolledOut(t *testing.T, namespace, name string) {
	t.Helper()
	c.waitFor(t, fmt.Sprintf("Deployment %s/%s rolled out", namespace, name), func() (bool, string) {
		d, err := c.Client().Get("apps/v1", "Deployment", namespace, name)
		if err != nil {
			return false, err.Error()
		}
		want := intField(d, "spec", "replicas")
		s := func(f string) int64 { return intField(d, "status", f) }
		done := intField(d, "metadata", "generation") == s("observedGeneration") &&
			s("updatedReplicas") == want && s("readyReplicas") == want && s("replicas") == want && s("terminatingReplicas") == 0
		return done, fmt.Sprintf("%d wanted, status %v", want, d["status"])
	}, namespace)
}

// startFleet builds the images (with extra archives beside them), starts
// the cluster, installs chart through Helm's library with values, starts
// Cluster Control and Metacontroller (in a pod, at a raised client
// throttle, as docs/install.md advises beyond a few dozen Workspaces),
// and creates a fleet of fleetSize workspaces, every one watched from the
// start, and waits until it has converged.
func startFleet(t *testing.T, mcBin string, extraArchives []string, chart, values string) *fleet {
	t.Helper()
	return startFleetOf(t, fleetSize(t), mcBin, extraArchives, chart, values)
}

// startFleetOf is startFleet with n workspaces.
func startFleetOf(t *testing.T, n int, mcBin string, extraArchives []string, chart, values string) *fleet {
	t.Helper()
	tm := NewTimings(t)
	archives := buildImages(t, mcBin)
	tm.Phase("images built")
	c := Start(t, tm, append(archives.Paths(), extraArchives...)...)
	f := &fleet{c: c, tm: tm, workspaces: map[string]*fleetWorkspace{}}
	f.phases = c.startPhaseMonitor(t)
	f.replicaSets = c.startReplicaSetMonitor(t)
	f.helm = c.newHelmRelease(t)
	tm.Phase("Helm library built")
	f.helm.install(t, c, chart, values)
	f.chart = chart
	f.resync = resyncPeriod(t, chart, "workspace")
	tm.Phase("chart installed, hook pods Ready")
	f.admin = c.startClusterControl(t)
	c.startMetacontroller(t, "--client-go-qps=100", "--client-go-burst=200")
	t.Cleanup(func() { c.checkMetacontrollerAllowed(t, f.apiServerDown) })
	tm.Phase("Cluster Control, Metacontroller Ready")
	f.create(t, n)
	took := f.waitConverged(t, "the new fleet", 15*time.Minute)
	tm.Phase(fmt.Sprintf("%d workspaces with claims converged", n))
	t.Logf("%d workspaces in %d namespaces converged in %.0f s", n, len(f.namespaces), took.Seconds())
	return f
}
