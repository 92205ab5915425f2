// The shapes of benches/peers/src/channels.rs in Go, for its `channels`
// table: the Rust side runs `go run go/channels.go MESSAGES REPEATS PINGS`
// once with GOMAXPROCS=1 and once with GOMAXPROCS=2 and reads the lines
// this prints, "<flavor>_<shape> <seconds> <seconds> ...", one time a
// repeat. Flavors: bounded0, bounded1 and boundedN (a buffer of MESSAGES;
// Go has no unbounded channel). Shapes as crossbeam-channel's suite defines
// them (its benchmarks/README.md), four producers and four consumers.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

const workers = 4

var messages int

// oneWay: a goroutine sends every message, this one takes them.
func oneWay(size int) {
	ch := make(chan uintptr, size)
	finished := make(chan struct{})
	go func() {
		for i := 0; i < messages; i++ {
			ch <- uintptr(i)
		}
		close(finished)
	}()
	for i := 0; i < messages; i++ {
		<-ch
	}
	<-finished
}

// inOrder: all sends from one goroutine, then all receives.
func inOrder(size int) {
	ch := make(chan uintptr, size)
	for i := 0; i < messages; i++ {
		ch <- uintptr(i)
	}
	for i := 0; i < messages; i++ {
		<-ch
	}
}

func produce(ch chan uintptr, wg chan struct{}) {
	for i := 0; i < messages/workers; i++ {
		ch <- uintptr(i)
	}
	wg <- struct{}{}
}

// manyToOne: four producers share a channel, this goroutine drains it.
func manyToOne(size int) {
	ch := make(chan uintptr, size)
	wg := make(chan struct{}, workers)
	for w := 0; w < workers; w++ {
		go produce(ch, wg)
	}
	for i := 0; i < messages/workers*workers; i++ {
		<-ch
	}
	for w := 0; w < workers; w++ {
		<-wg
	}
}

// manyToMany: four producers and four consumers on one channel.
func manyToMany(size int) {
	ch := make(chan uintptr, size)
	wg := make(chan struct{}, 2*workers)
	for w := 0; w < workers; w++ {
		go produce(ch, wg)
		go func() {
			for i := 0; i < messages/workers; i++ {
				<-ch
			}
			wg <- struct{}{}
		}()
	}
	for w := 0; w < 2*workers; w++ {
		<-wg
	}
}

func four(size int) [workers]chan uintptr {
	var cs [workers]chan uintptr
	for i := range cs {
		cs[i] = make(chan uintptr, size)
	}
	return cs
}

func takeAny(cs [workers]chan uintptr) {
	select {
	case <-cs[0]:
	case <-cs[1]:
	case <-cs[2]:
	case <-cs[3]:
	}
}

// selectRecv: a producer per channel; this goroutine selects over all four.
func selectRecv(size int) {
	cs := four(size)
	wg := make(chan struct{}, workers)
	for w := 0; w < workers; w++ {
		go produce(cs[w], wg)
	}
	for i := 0; i < messages/workers*workers; i++ {
		takeAny(cs)
	}
	for w := 0; w < workers; w++ {
		<-wg
	}
}

// selectBoth: four producers select a send over four channels, four
// consumers select a receive over them.
func selectBoth(size int) {
	cs := four(size)
	wg := make(chan struct{}, 2*workers)
	for w := 0; w < workers; w++ {
		go func() {
			for i := 0; i < messages/workers; i++ {
				m := uintptr(i)
				select {
				case cs[0] <- m:
				case cs[1] <- m:
				case cs[2] <- m:
				case cs[3] <- m:
				}
			}
			wg <- struct{}{}
		}()
		go func() {
			for i := 0; i < messages/workers; i++ {
				takeAny(cs)
			}
			wg <- struct{}{}
		}()
	}
	for w := 0; w < 2*workers; w++ {
		<-wg
	}
}

var pings int

// pingPong: round trips between this goroutine and an echoing one.
func pingPong(size int) {
	there := make(chan uintptr, size)
	back := make(chan uintptr, size)
	go func() {
		for v := range there {
			back <- v
		}
	}()
	for i := 0; i < pings; i++ {
		there <- uintptr(i)
		<-back
	}
	close(there)
}

func main() {
	messages, _ = strconv.Atoi(os.Args[1])
	repeats, _ := strconv.Atoi(os.Args[2])
	pings, _ = strconv.Atoi(os.Args[3])
	type row struct {
		name string
		run  func(int)
		size int
		per  int
	}
	var rows []row
	for _, f := range []struct {
		name string
		size int
	}{{"bounded0", 0}, {"bounded1", 1}, {"boundedN", messages}} {
		if f.size == messages {
			rows = append(rows, row{f.name + "_seq", inOrder, f.size, messages})
		}
		rows = append(rows,
			row{f.name + "_spsc", oneWay, f.size, messages},
			row{f.name + "_mpsc", manyToOne, f.size, messages},
			row{f.name + "_mpmc", manyToMany, f.size, messages},
			row{f.name + "_select_rx", selectRecv, f.size, messages},
			row{f.name + "_select_both", selectBoth, f.size, messages})
	}
	rows = append(rows, row{"bounded0_pingpong", pingPong, 0, pings},
		row{"bounded1_pingpong", pingPong, 1, pings})
	for _, r := range rows {
		fmt.Print(r.name)
		for k := 0; k < repeats; k++ {
			start := time.Now()
			r.run(r.size)
			fmt.Printf(" %.9f", time.Since(start).Seconds())
		}
		fmt.Println()
	}
}
