// calico-node's IPv4 autodetection, written for these tests from calico's source as read at
// v3.32.1 (node/pkg/lifecycle/startup/autodetection: AutoDetectCIDR's methods,
// FilteredEnumeration, GetInterfaces, convertInterface, ReachDestination and
// DEFAULT_INTERFACES_TO_EXCLUDE), standard library only. Run in a namespace with the method as
// its argument (IP_AUTODETECTION_METHOD; kubernetes-internal-ip needs a Node and is not
// here), it prints "pick IP/LEN on IFACE", or "none: WHY" where calico detects nothing.
// tests/tests/calico_pick_layouts.rs judges `explain`'s calico pick by it.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
)

// The exclusion list of first-found and skip-interface= (v3.25.0 to v3.32.1).
var defaultExclusions = []string{
	"^docker.*", "^cbr.*", "^dummy.*", "^podman.*",
	"^virbr.*", "^lxcbr.*", "^veth.*", "^lo", "^br-.*",
	"^cali.*", "^tunl.*", "^flannel.*", "^kube-ipvs.*", "^cni.*",
	"^vxlan\\.calico.*", "^vxlan-v6\\.calico.*", "^wireguard\\.cali.*", "^wg-v6\\.cali.*",
	"^nodelocaldns.*",
}

// An interface's name and its IPv4 addresses with their prefixes (the IP kept, not masked).
type iface struct {
	name  string
	cidrs []net.IPNet
}

// one joins regexes as calico does: "(a)|(b)|…", unanchored.
func one(list []string) (*regexp.Regexp, error) {
	if len(list) == 0 {
		return nil, nil
	}
	return regexp.Compile("(" + strings.Join(list, ")|(") + ")")
}

// interfaces walks net.Interfaces() in reverse, keeping those the include regex matches (all
// when none) and the exclude regex does not, each with its IPv4 addresses in their order.
func interfaces(incl, excl []string) ([]iface, error) {
	all, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	in, err := one(incl)
	if err != nil {
		return nil, err
	}
	ex, err := one(excl)
	if err != nil {
		return nil, err
	}
	var kept []iface
	for i := len(all) - 1; i >= 0; i-- {
		name := all[i].Name
		if (in != nil && !in.MatchString(name)) || (ex != nil && ex.MatchString(name)) {
			continue
		}
		addrs, err := all[i].Addrs()
		if err != nil {
			continue
		}
		f := iface{name: name}
		for _, a := range addrs {
			ip, network, err := net.ParseCIDR(a.String())
			if err != nil || ip.To4() == nil {
				continue
			}
			network.IP = ip.To4()
			f.cidrs = append(f.cidrs, *network)
		}
		kept = append(kept, f)
	}
	return kept, nil
}

// enumerate is FilteredEnumeration: the first global unicast address inside cidrs (any when
// there are none).
func enumerate(incl, excl []string, cidrs []*net.IPNet) (string, net.IPNet, error) {
	ifaces, err := interfaces(incl, excl)
	if err != nil {
		return "", net.IPNet{}, err
	}
	if len(ifaces) == 0 {
		return "", net.IPNet{}, errors.New("no valid host interfaces found")
	}
	for _, f := range ifaces {
		for _, c := range f.cidrs {
			if !c.IP.IsGlobalUnicast() {
				continue
			}
			if len(cidrs) == 0 {
				return f.name, c, nil
			}
			for _, n := range cidrs {
				if n.Contains(c.IP) {
					return f.name, c, nil
				}
			}
		}
	}
	return "", net.IPNet{}, errors.New("no valid IPv4 addresses found on the host interfaces")
}

// reach is ReachDestination: a UDP "connection" to dest port 80, its local address found on
// an interface.
func reach(dest string) (string, net.IPNet, error) {
	conn, err := net.Dial("udp4", net.JoinHostPort(dest, "80"))
	if err != nil {
		return "", net.IPNet{}, err
	}
	defer conn.Close()
	local := conn.LocalAddr().(*net.UDPAddr).IP
	ifaces, err := interfaces(nil, nil)
	if err != nil {
		return "", net.IPNet{}, err
	}
	for _, f := range ifaces {
		for _, c := range f.cidrs {
			if c.IP.Equal(local) {
				return f.name, c, nil
			}
		}
	}
	return "", net.IPNet{}, fmt.Errorf("autodetected IPv4 address does not match any addresses found on local interfaces: %s", local)
}

func detect(method string) (string, net.IPNet, error) {
	split := regexp.MustCompile(`\s*,\s*`).Split
	switch {
	case method == "" || method == "first-found":
		return enumerate(nil, defaultExclusions, nil)
	case strings.HasPrefix(method, "interface="):
		return enumerate(split(strings.TrimPrefix(method, "interface="), -1), nil, nil)
	case strings.HasPrefix(method, "cidr="):
		var cidrs []*net.IPNet
		for _, text := range split(strings.TrimPrefix(method, "cidr="), -1) {
			_, n, err := net.ParseCIDR(text)
			if err != nil {
				return "", net.IPNet{}, fmt.Errorf("invalid CIDR %q", text)
			}
			cidrs = append(cidrs, n)
		}
		return enumerate(nil, nil, cidrs)
	case strings.HasPrefix(method, "can-reach="):
		return reach(strings.TrimPrefix(method, "can-reach="))
	case strings.HasPrefix(method, "skip-interface="):
		excl := append(append([]string{}, defaultExclusions...), split(strings.TrimPrefix(method, "skip-interface="), -1)...)
		return enumerate(nil, excl, nil)
	}
	return "", net.IPNet{}, fmt.Errorf("Invalid IP autodetection method: %s", method)
}

func main() {
	name, cidr, err := detect(os.Args[1])
	if err != nil {
		fmt.Println("none:", err)
		return
	}
	fmt.Printf("pick %s on %s\n", cidr.String(), name)
}
