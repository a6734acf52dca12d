package claims_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/formspec/formspec-hooks/internal/hooks/claims"
)

func TestEndpoint(t *testing.T) {
	cases := map[string]struct {
		reason string
		data   map[string]string
		want   string
		// secret is text of the credentials that must not be in the result.
		secret string
	}{
		"HostPort":      {reason: "host:port.", data: map[string]string{"host": "db", "port": "5432"}, want: "db:5432"},
		"IPv6":          {reason: "IPv6 hosts are bracketed.", data: map[string]string{"host": "fd00::1", "port": "5432"}, want: "[fd00::1]:5432"},
		"HostWithUser":  {reason: "A host key holding userinfo is not a host.", data: map[string]string{"host": "app:pw@db", "port": "5432"}, want: "", secret: "pw"},
		"PortNotNumber": {reason: "A port must be a number.", data: map[string]string{"host": "db", "port": "pw"}, want: "", secret: "pw"},
		"URI":           {reason: "A URI's hosts, without its credentials.", data: map[string]string{"uri": "mongodb://u:pw@m1:27017,m2:27017/db"}, want: "m1:27017,m2:27017", secret: "pw"},
		"URINoUser":     {reason: "A URI without credentials.", data: map[string]string{"uri": "mongodb://m1.data.svc:27017/orders?replicaSet=rs0"}, want: "m1.data.svc:27017"},
		"URINoPort":     {reason: "The port is optional.", data: map[string]string{"uri": "mongodb+srv://u:pw@cluster0.example.net/orders"}, want: "cluster0.example.net", secret: "pw"},
		"URIIPv6":       {reason: "Bracketed IPv6 hosts.", data: map[string]string{"uri": "mongodb://u:pw@[fd00::1]:27017,[fd00::2]/db"}, want: "[fd00::1]:27017,[fd00::2]", secret: "pw"},
		"URIAtInPassword": {
			reason: "An unescaped '@' in the password: userinfo runs to the last '@'.",
			data:   map[string]string{"uri": "mongodb://app:p@ss@db:27017/orders"}, want: "db:27017", secret: "p@ss",
		},
		"URISlashInNumericPassword": {
			reason: "An unescaped '/' ends a parsed authority at app:1234, which looks like host:port.",
			data:   map[string]string{"uri": "mongodb://app:1234/5678@db:27017"}, want: "", secret: "1234",
		},
		"URISlashFirstInPassword": {
			reason: "A password starting with '/' leaves 'app:' as the authority.",
			data:   map[string]string{"uri": "mongodb://app:/s3cret@db"}, want: "", secret: "app",
		},
		"URISlashNoPath": {
			reason: "The same with hosts that would pass the host check on their own.",
			data:   map[string]string{"uri": "mongodb://db1:27017/x@db2:27017"}, want: "",
		},
		"URIQuestionInPassword": {
			reason: "'?' ends the authority too.",
			data:   map[string]string{"uri": "mongodb://app:2718?2818@db:27017"}, want: "", secret: "2718",
		},
		"URIHashInPassword": {
			reason: "'#' ends the authority too.",
			data:   map[string]string{"uri": "mongodb://app:2718#2818@db:27017"}, want: "", secret: "2718",
		},
		"URISlashInUserOnly": {
			reason: "A username with a '/' and no password.",
			data:   map[string]string{"uri": "mongodb://team/app@db:27017"}, want: "", secret: "team",
		},
		"URIPercentHost": {
			reason: "A percent-encoded host is not plain.",
			data:   map[string]string{"uri": "mongodb://u:pw@db%2Fx:27017"}, want: "", secret: "pw",
		},
		"URIBadPort": {
			reason: "A non-numeric port after the last '@' is not a port.",
			data:   map[string]string{"uri": "mongodb://db:s3cret"}, want: "", secret: "s3cret",
		},
		"URIPortOutOfRange": {
			reason: "Ports stop at 65535.",
			data:   map[string]string{"uri": "mongodb://db:2718281828"}, want: "", secret: "2718281828",
		},
		"URIEmptyHost": {
			reason: "An empty entry in the host list.",
			data:   map[string]string{"uri": "mongodb://u:pw@db:27017,/orders"}, want: "", secret: "pw",
		},
		"URINoHosts": {
			reason: "Credentials and no host.",
			data:   map[string]string{"uri": "mongodb://u:pw@/orders"}, want: "", secret: "pw",
		},
		"URINoScheme": {
			reason: "Not a URI at all.",
			data:   map[string]string{"uri": "u:pw@db:27017"}, want: "", secret: "pw",
		},
		"BadURI":  {reason: "An unparsable URI gives nothing (its parse error would quote it).", data: map[string]string{"uri": "mongodb://u:pw@%zz"}, want: "", secret: "pw"},
		"Nothing": {reason: "No host, no endpoint.", data: map[string]string{"password": "x"}, want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &corev1.Secret{Data: map[string][]byte{}}
			for k, v := range tc.data {
				s.Data[k] = []byte(v)
			}
			got := claims.Endpoint(s)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nEndpoint(): -want, +got:\n%s", tc.reason, diff)
			}
			if tc.secret != "" && strings.Contains(got, tc.secret) {
				t.Errorf("%s\nEndpoint() = %q holds credentials %q", tc.reason, got, tc.secret)
			}
		})
	}
}
