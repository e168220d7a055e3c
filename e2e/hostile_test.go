package e2e

import (
	"context"
	"net/netip"
	"testing"

	"github.com/docker/docker/api/types/network"

	"github.com/dsh-container/dsh-container/backend/container/containertest"
)

// TestHostile: programs that try to exhaust, escape or outlive their
// container, under Docker.
func TestHostile(t *testing.T) { containertest.RunHostile(t, dockerConfig(t)) }

// TestBudgets: each budget fires at its setting, under Docker.
func TestBudgets(t *testing.T) { containertest.RunBudgets(t, dockerConfig(t)) }

// bridgeGateway is the address of the daemon's default bridge on the host,
// which a container on that network could reach; ours must not.
func bridgeGateway(t *testing.T) string {
	nw, err := cli.NetworkInspect(context.Background(), "bridge", network.InspectOptions{})
	if err != nil {
		t.Logf("no bridge network (%v); using 172.17.0.1", err)
		return "172.17.0.1"
	}
	for _, c := range nw.IPAM.Config {
		if c.Gateway != "" {
			return c.Gateway
		}
		if p, err := netip.ParsePrefix(c.Subnet); err == nil && p.Addr().Is4() {
			return p.Masked().Addr().Next().String()
		}
	}
	return "172.17.0.1"
}
