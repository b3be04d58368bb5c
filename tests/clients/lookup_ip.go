// For each name on the command line: net.LookupIP(name) and one line "name ip ip ..." in the
// order returned (or "name ERROR text"). Standard library only; built with several Go toolchains
// by tests/tests/resolver_orders.rs.
package main

import (
	"fmt"
	"net"
	"os"
	"strings"
)

func main() {
	for _, name := range os.Args[1:] {
		ips, err := net.LookupIP(name)
		if err != nil {
			fmt.Printf("%s ERROR %s\n", name, strings.ReplaceAll(err.Error(), " ", "_"))
			continue
		}
		fmt.Print(name)
		for _, ip := range ips {
			fmt.Printf(" %s", ip)
		}
		fmt.Println()
	}
}
