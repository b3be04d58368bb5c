// The Go lookup storm of `cargo xtask bench`: N net.LookupIP("localhost") calls (two hosts-file
// answers, so Go's sort runs each time). Standard library only.
package main

import (
	"net"
	"os"
	"strconv"
)

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	for i := 0; i < n; i++ {
		if _, err := net.LookupIP("localhost"); err != nil {
			os.Exit(1)
		}
	}
}
