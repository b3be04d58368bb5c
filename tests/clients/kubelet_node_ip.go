// kubelet's NodeAddress without --node-ip (or with "::", the IPv6 preference: -prefer6), as
// pkg/kubelet/nodestatus runs it: net.LookupIP of the node name, then validateNodeIP on each
// answer (not loopback, multicast, link-local or unspecified; held by an interface per
// net.InterfaceAddrs()); the first valid address of the preferred family, else the first valid
// one. Prints "pick IP", or "pick none" and then what kubelet falls back to: ResolveBindAddress →
// chooseHostInterface of k8s.io/apimachinery/pkg/util/net (the default routes of
// /proc/net/route and /proc/net/ipv6_route, the preferred family first; a route's interface if
// up, its first global unicast address of the family; else a global one on an up loopback
// interface), as "fallback IP" or "fallback error: TEXT".
//
// Written from kubelet's and apimachinery's documented behaviour, standard library only. Run
// as a program named "kubelet", the tracer's live replay is judged by its output; run in random
// namespaces, `explain`'s kubelet pick is (tests/tests/kubelet_pick_layouts.rs).
package main

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
)

// validateNodeIP is kubelet's (pkg/kubelet/kubelet_node_status.go).
func validateNodeIP(nodeIP net.IP) error {
	if nodeIP.To4() == nil && nodeIP.To16() == nil {
		return errors.New("nodeIP must be a valid IP address")
	}
	if nodeIP.IsLoopback() {
		return errors.New("nodeIP can't be loopback address")
	}
	if nodeIP.IsMulticast() {
		return errors.New("nodeIP can't be a multicast address")
	}
	if nodeIP.IsLinkLocalUnicast() {
		return errors.New("nodeIP can't be a link-local unicast address")
	}
	if nodeIP.IsUnspecified() {
		return errors.New("nodeIP can't be an all zeros address")
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return err
	}
	for _, addr := range addrs {
		var ip net.IP
		switch v := addr.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if ip != nil && ip.Equal(nodeIP) {
			return nil
		}
	}
	return fmt.Errorf("node IP: %q not found in the host's network interfaces", nodeIP.String())
}

// A default route as a route file lists it.
type route struct {
	iface string
	v6    bool
}

// routeIP decodes a route file's hex address (IPv4 in host byte order, little endian here).
func routeIP(text string, v6 bool) (net.IP, error) {
	b, err := hex.DecodeString(text)
	if err != nil {
		return nil, err
	}
	if !v6 {
		if len(b) != net.IPv4len {
			return nil, errors.New("invalid IPv4 address in route")
		}
		return net.IP{b[3], b[2], b[1], b[0]}, nil
	}
	if len(b) != net.IPv6len {
		return nil, errors.New("invalid IPv6 address in route")
	}
	return net.IP(b), nil
}

// defaultRoutes reads one route file: /proc/net/route (fields: interface, destination,
// gateway; a header line) or /proc/net/ipv6_route (destination 0, gateway 4, interface 9;
// routes without a gateway left out).
func defaultRoutes(path string, v6 bool) ([]route, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var routes []route
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			break
		}
		if strings.HasPrefix(line, "Iface") {
			continue
		}
		fields := strings.Fields(line)
		dst, gw, iface := 1, 2, 0
		if v6 {
			dst, gw, iface = 0, 4, 9
		}
		d, err := routeIP(fields[dst], v6)
		if err != nil {
			return nil, err
		}
		g, err := routeIP(fields[gw], v6)
		if err != nil {
			return nil, err
		}
		if !d.IsUnspecified() || (v6 && g.IsUnspecified()) {
			continue
		}
		routes = append(routes, route{iface: fields[iface], v6: v6})
	}
	return routes, nil
}

// globalIP is the first global unicast address of the family in addrs (getMatchingGlobalIP).
func globalIP(addrs []net.Addr, v6 bool) net.IP {
	for _, a := range addrs {
		ip, _, err := net.ParseCIDR(a.String())
		if err != nil {
			continue
		}
		if (ip.To4() == nil) == v6 && ip.IsGlobalUnicast() {
			return ip
		}
	}
	return nil
}

// chooseHostInterface with /proc/net/route present.
func chooseHostInterface(prefer6 bool) (net.IP, error) {
	routes, err := defaultRoutes("/proc/net/route", false)
	if err != nil {
		return nil, err
	}
	v6routes, _ := defaultRoutes("/proc/net/ipv6_route", true)
	routes = append(routes, v6routes...)
	if len(routes) == 0 {
		return nil, fmt.Errorf("no default routes found in %q or %q", "/proc/net/route", "/proc/net/ipv6_route")
	}
	for _, v6 := range []bool{prefer6, !prefer6} {
		for _, r := range routes {
			if r.v6 != v6 {
				continue
			}
			intf, err := net.InterfaceByName(r.iface)
			if err != nil {
				return nil, err
			}
			if intf.Flags&net.FlagUp != 0 {
				addrs, err := intf.Addrs()
				if err != nil {
					return nil, err
				}
				if ip := globalIP(addrs, v6); ip != nil {
					return ip, nil
				}
			}
			// getIPFromLoopbackInterface
			intfs, err := net.Interfaces()
			if err != nil {
				return nil, err
			}
			for _, l := range intfs {
				if l.Flags&net.FlagUp == 0 || l.Flags&net.FlagLoopback == 0 {
					continue
				}
				addrs, err := l.Addrs()
				if err != nil {
					return nil, err
				}
				if ip := globalIP(addrs, v6); ip != nil {
					return ip, nil
				}
			}
		}
	}
	return nil, errors.New("unable to select an IP from default routes.")
}

func main() {
	prefer6 := false
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "-prefer6" {
		prefer6, args = true, args[1:]
	}
	addrs, _ := net.LookupIP(args[0])
	var picked net.IP
	for _, ip := range addrs {
		if validateNodeIP(ip) != nil {
			continue
		}
		if (ip.To4() != nil) != prefer6 {
			picked = ip
			break
		}
		if picked == nil {
			picked = ip
		}
	}
	if picked != nil {
		fmt.Println("pick", picked)
		return
	}
	fmt.Println("pick none")
	if ip, err := chooseHostInterface(prefer6); err != nil {
		fmt.Println("fallback error:", err)
	} else {
		fmt.Println("fallback", ip)
	}
}
