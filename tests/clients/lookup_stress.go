// Looks a name up N times while its goroutine stacks grow and shrink (deep recursion between
// lookups, lookups from fresh goroutines too), and prints one line summarising every result:
// the same with and without Go resolver probes attached, or the probes broke the program.
// Standard library only.
package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
)

// deep recurses n levels with a frame big enough to make the runtime grow (and move) the stack.
func deep(n int) int {
	var pad [256]byte
	pad[n%256] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%256])
}

func main() {
	name := os.Args[1]
	n, _ := strconv.Atoi(os.Args[2])
	first := map[string]int{}
	sum := 0
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		sum += deep(i%2000 + 1)
		lookup := func() {
			ips, err := net.LookupIP(name)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				first["error"]++
				return
			}
			first[ips[0].String()]++
		}
		if i%10 == 0 {
			wg.Add(1)
			go func() { defer wg.Done(); deep(3000); lookup() }()
		} else {
			lookup()
		}
	}
	wg.Wait()
	fmt.Println(first, sum)
}
