// Command netpollwait measures how long a request waits before a Go server
// even sees it when the server's only P never goes idle.
//
// It starts a server process with GOMAXPROCS=1 whose background goroutines
// keep the CPU busy in one of three ways, and pings it from this process
// (one request at a time, a few milliseconds apart) to time the round trip
// of a handler that does nothing:
//
//   - idle: no background work;
//   - busy: four goroutines run 1 ms slices of CPU work back to back
//     (runtime.Gosched between slices), so a runnable goroutine is always
//     waiting: the run queue never empties;
//   - drains: one goroutine runs 0.9 ms slices with a 0.1 ms sleep between
//     them: the CPU is 90% busy, but the run queue empties every slice.
//
// The runtime polls the network when a P finds no other work, and otherwise
// only from sysmon, about every 10 ms. So in the busy case a request's bytes
// wait in the socket for up to 10 ms before any goroutine of the server (and
// so any gate in it) can see them, and then wait their turn in the run
// queue; in the drains case they are seen within a slice. No signal inside
// the process measures that first wait: /sched/latencies starts when the
// goroutine is made runnable, after the poll.
//
//	go run ./cmd/netpollwait
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"time"
)

func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

func serve(mode string, ln net.Listener) {
	runtime.GOMAXPROCS(1)
	switch mode {
	case "busy":
		for range 4 {
			go func() {
				for {
					spin(time.Millisecond)
					runtime.Gosched()
				}
			}()
		}
	case "drains":
		go func() {
			for {
				spin(900 * time.Microsecond)
				time.Sleep(100 * time.Microsecond)
			}
		}()
	}
	http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
}

func main() {
	server := flag.String("server", "", "internal: run as the server in this mode, on the inherited listener")
	n := flag.Int("n", 300, "pings per mode")
	flag.Parse()
	if *server != "" {
		ln, err := net.FileListener(os.NewFile(3, "listener"))
		if err != nil {
			panic(err)
		}
		serve(*server, ln)
		return
	}
	fmt.Println("mode     pings  mean ms  p50 ms  p90 ms  p99 ms")
	for _, mode := range []string{"idle", "busy", "drains"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		f, _ := ln.(*net.TCPListener).File()
		cmd := exec.Command(os.Args[0], "-server", mode)
		cmd.ExtraFiles = []*os.File{f}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			panic(err)
		}
		url := "http://" + ln.Addr().String() + "/"
		time.Sleep(300 * time.Millisecond)
		var lat []float64
		for i := range *n {
			t0 := time.Now()
			resp, err := http.Get(url)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat = append(lat, time.Since(t0).Seconds()*1000)
			}
			time.Sleep(time.Duration(3+i%7) * time.Millisecond)
		}
		cmd.Process.Kill()
		cmd.Wait()
		ln.Close()
		slices.Sort(lat)
		mean := 0.0
		for _, v := range lat {
			mean += v
		}
		mean /= float64(len(lat))
		q := func(p float64) float64 { return lat[int(p*float64(len(lat)-1))] }
		fmt.Printf("%-7s %6s %8.2f %7.2f %7.2f %7.2f\n", mode, strconv.Itoa(len(lat)), mean, q(0.5), q(0.9), q(0.99))
	}
}
