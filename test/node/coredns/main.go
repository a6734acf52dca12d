// Command coredns is CoreDNS with only the plugins the one-node test cluster
// needs: it answers names in cluster.local (and the reverse zones) from the
// test API server and nothing else. Without the forward or cache plugins there
// is no upstream: a name outside the cluster gets REFUSED, so no lookup ever
// leaves the machine. Importing only these plugins also keeps the build small
// (the full CoreDNS pulls in every cloud provider's SDK).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives are the plugins above in CoreDNS's own order (plugin.cfg),
// which is the order a query passes through them.
var directives = []string{"bind", "ready", "errors", "log", "kubernetes"}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
