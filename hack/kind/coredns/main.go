// CoreDNS for the kind node's coredns image (hack/kind-node-image.sh): the plugins that kubeadm's
// default Corefile names, and no others, so the build stays a few minutes on two cores instead
// of compiling every cloud provider's DNS client. The order is CoreDNS's own plugin.cfg order.
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
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func init() {
	dnsserver.Directives = []string{
		"reload", "bind", "ready", "health", "prometheus", "errors", "loadbalance", "cache",
		"kubernetes", "loop", "forward",
	}
}

func main() {
	coremain.Run()
}
