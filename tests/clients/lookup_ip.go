// For each name on the command line: net.LookupIP(name) and one line "name ip ip ..." in the
// order returned (or "name ERROR text"). With -host first, instead two lines per name:
// net.LookupHost as "host name addr ..." and (*net.Resolver).LookupIPAddr as "ipaddr name
// ip ...". Standard library only; built with several Go toolchains by the resolver tests.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
)

// lookupIPAddr is (*net.Resolver).LookupIPAddr as plain IPs.
func lookupIPAddr(name string) ([]net.IP, error) {
	addrs, err := net.DefaultResolver.LookupIPAddr(context.Background(), name)
	ips := make([]net.IP, len(addrs))
	for i, a := range addrs {
		ips[i] = a.IP
	}
	return ips, err
}

// lookupHost is net.LookupHost, its strings parsed.
func lookupHost(name string) ([]net.IP, error) {
	hosts, err := net.LookupHost(name)
	ips := make([]net.IP, len(hosts))
	for i, h := range hosts {
		ips[i] = net.ParseIP(h)
	}
	return ips, err
}

// show prints "prefix ip ip ..." or "prefix ERROR text".
func show(prefix string, ips []net.IP, err error) {
	if err != nil {
		fmt.Printf("%s ERROR %s\n", prefix, strings.ReplaceAll(err.Error(), " ", "_"))
		return
	}
	fmt.Print(prefix)
	for _, ip := range ips {
		fmt.Printf(" %s", ip)
	}
	fmt.Println()
}

func main() {
	names := os.Args[1:]
	hostMode := len(names) > 0 && names[0] == "-host"
	if hostMode {
		names = names[1:]
	}
	for _, name := range names {
		if hostMode {
			ips, err := lookupHost(name)
			show("host "+name, ips, err)
			ips, err = lookupIPAddr(name)
			show("ipaddr "+name, ips, err)
			continue
		}
		ips, err := net.LookupIP(name)
		show(name, ips, err)
	}
}
