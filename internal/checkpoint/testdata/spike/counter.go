package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	state := make([]byte, 32<<20) // 32 MiB touched
	for i := range state {
		state[i] = byte(i * 7)
	}
	n := 0
	for {
		n++
		var sum byte
		for i := 0; i < len(state); i += 4096 {
			sum += state[i]
		}
		fmt.Printf("n=%d sum=%d pid=%d\n", n, sum, os.Getpid())
		os.WriteFile("/workspace/count", []byte(fmt.Sprint(n)), 0o644)
		time.Sleep(100 * time.Millisecond)
	}
}
