// The Go side of examples/deadlock.rs (the README's "Seeing inside"):
// `go run benches/peers/go/deadlock.go` prints Go's deadlock dump.

package main

import "sync"

func transfer(from, to *sync.Mutex, both *sync.WaitGroup) {
	from.Lock()
	both.Done()
	both.Wait()
	to.Lock() // each goroutine waits here for the other
}

func main() {
	var a, b sync.Mutex
	var both, done sync.WaitGroup
	both.Add(2)
	done.Add(2)
	go func() { transfer(&a, &b, &both); done.Done() }()
	go func() { transfer(&b, &a, &both); done.Done() }()
	done.Wait()
}
