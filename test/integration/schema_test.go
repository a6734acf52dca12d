package integration

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// schemaCase is one object to dry-run create against the installed CRDs.
type schemaCase struct {
	reason string
	obj    controlplane.Object
	// wantErrs are substrings the rejection must contain: the field path
	// and the message of the rule that should fire. None means the object
	// must be accepted.
	wantErrs []string
	// wantSpec is the spec the API server must return: the sent one with
	// defaults applied. When nil, the returned spec must equal the sent one,
	// which also shows that the schema prunes no field the object uses.
	wantSpec any
}

// runSchemaCases dry-run creates each case's object and checks that it is
// accepted (with the expected spec) or rejected for the expected reasons.
func runSchemaCases(t *testing.T, c *controlplane.Client, cases map[string]schemaCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := c.DryRunCreate(tc.obj)
			if len(tc.wantErrs) > 0 {
				checkRejected(t, tc.reason, err, tc.wantErrs)
				return
			}
			if err != nil {
				t.Fatalf("%s\nDryRunCreate(...): want accepted, got %v", tc.reason, err)
			}
			want := tc.wantSpec
			if want == nil {
				want = tc.obj["spec"]
			}
			if diff := cmp.Diff(want, got["spec"]); diff != "" {
				t.Errorf("%s\nDryRunCreate(...) spec: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// checkRejected checks that err is a 422 whose message contains every
// wanted substring.
func checkRejected(t *testing.T, reason string, err error, wantErrs []string) {
	t.Helper()
	var apiErr *controlplane.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusUnprocessableEntity {
		t.Fatalf("%s\nwant a 422 Invalid rejection mentioning %q, got %v", reason, wantErrs, err)
	}
	for _, want := range wantErrs {
		if !strings.Contains(apiErr.Status.Message, want) {
			t.Errorf("%s\nrejection does not mention %q:\n%s", reason, want, apiErr.Status.Message)
		}
	}
}

func ptr[T any](v T) *T { return &v }
