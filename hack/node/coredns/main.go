// CoreDNS with only the plugins the real node's Corefile uses (hack/node-lib.sh, start_coredns),
// in the order CoreDNS's own plugin.cfg runs them. The full build compiles every cloud
// provider's SDK and tracer besides: four times the build time on a 2-core machine, for nothing
// the node uses.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
)

func init() {
	dnsserver.Directives = []string{"bind", "health", "errors", "cache", "kubernetes", "forward"}
}

func main() {
	coremain.Run()
}
