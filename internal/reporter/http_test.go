package reporter

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/internal/clustercontrol"
)

// TestLocalAPIContentType posts a batch to the sidecar's localhost API over
// HTTP with the content types clients send: the one JSON rule of every
// server here accepts parameters, and errors come in the one error format.
func TestLocalAPIContentType(t *testing.T) {
	_, url := startCC(t, clustercontrol.Options{})
	srv := httptest.NewServer(newReporter(t, fastConfig(url)).LocalHandler())
	defer srv.Close()

	type reply struct {
		Code              int
		ContentType, Body string
	}
	notJSON := reply{Code: 415, ContentType: "application/json", Body: `{"error":"content type must be application/json"}` + "\n"}
	cases := map[string]struct {
		reason string
		ct     string
		want   reply
	}{
		"Plain":       {reason: "What the hand-off client sends.", ct: "application/json", want: reply{Code: 204}},
		"WithCharset": {reason: "A charset parameter is still JSON.", ct: "application/json; charset=utf-8", want: reply{Code: 204}},
		"Text":        {reason: "Another type is refused in the error format.", ct: "text/plain", want: notJSON},
		"None":        {reason: "No type is not JSON either.", ct: "", want: notJSON},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, srv.URL+observation.PathObservations, strings.NewReader(`{"observations":[]}`))
			if err != nil {
				t.Fatal(err)
			}
			if tc.ct != "" {
				req.Header.Set("Content-Type", tc.ct)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body := new(strings.Builder)
			_, _ = io.Copy(body, resp.Body)
			got := reply{Code: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: body.String()}
			if got.Code == 204 {
				got.ContentType = ""
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
