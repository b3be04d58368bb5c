// kubelet's NodeAddress without --node-ip, as pkg/kubelet/nodestatus runs it: net.LookupIP of
// the node name, then validateNodeIP on each answer (not loopback, multicast, link-local or
// unspecified; held by an interface per net.InterfaceAddrs()); the first valid IPv4 address,
// else the first valid one. Prints "pick IP" or "pick none" (then kubelet would fall back to
// the default-route interface). Run as a program named "kubelet": the tracer's live replay of
// this rule is judged by this output. Standard library only.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
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

func main() {
	addrs, _ := net.LookupIP(os.Args[1])
	var picked net.IP
	for _, ip := range addrs {
		if validateNodeIP(ip) != nil {
			continue
		}
		if ip.To4() != nil {
			picked = ip
			break
		}
		if picked == nil {
			picked = ip
		}
	}
	if picked == nil {
		fmt.Println("pick none")
		return
	}
	fmt.Println("pick", picked)
}
