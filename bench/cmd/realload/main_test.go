package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain doubles as the server: the harness re-executes the test binary
// with serverEnv set, as it re-executes the command.
func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) != "" {
		os.Exit(serverMain())
	}
	goleak.VerifyTestMain(m)
}

// TestEndToEnd runs a tiny matrix end to end — real server processes, HTTP
// through vegeta and gRPC — and checks that requests were sent, counted and
// reported. It asserts nothing about timing.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	matrix, err := parseMatrix("http:1:200us,grpc:1:200us")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := parseContenders("shed")
	if err != nil {
		t.Fatal(err)
	}
	d := 250 * time.Millisecond
	o := options{
		matrix: matrix, contenders: cs, cases: []string{caseWarm},
		steady: d, warmup: d, overload: d, capDur: d, costDur: d, timeout: d,
		lone: 2, loneDelay: 50 * time.Millisecond, calib: 1000, grpcConns: 2, costs: true,
		trace: t.TempDir(),
	}
	if testing.Verbose() {
		o.log = os.Stderr
	}
	rep, err := run(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.caps) != 2 {
		t.Fatalf("%d capacity measurements, want 2", len(rep.caps))
	}
	for _, c := range rep.caps {
		if c.sent == 0 || c.rate <= 0 {
			t.Errorf("%v: capacity run sent %d requests, measured %.1f/s", c.config, c.sent, c.rate)
		}
	}
	if len(rep.rows) != 2 {
		t.Fatalf("%d rows, want 2 (2 transports × 1 contender × 1 case)", len(rep.rows))
	}
	for _, r := range rep.rows {
		if r.sent == 0 || r.ok+r.refused+r.timeout+r.failed != r.sent {
			t.Errorf("%v %s %s: sent %d, counted ok %d refused %d timeout %d failed %d", r.config, r.contender, r.caseName, r.sent, r.ok, r.refused, r.timeout, r.failed)
		}
		if r.lone.err != nil || len(r.lone.samples) != 2 {
			t.Errorf("%v %s %s: lone client: %d samples, error %v", r.config, r.contender, r.caseName, len(r.lone.samples), r.lone.err)
		}
	}
	if want := 2 * (1 + len(refusalPaths)); len(rep.costs) != want {
		t.Fatalf("%d refusal costs, want %d", len(rep.costs), want)
	}
	for _, c := range rep.costs {
		if c.rate <= 0 || c.wrong != 0 {
			t.Errorf("%s %s: %.1f answers/s, %d of the wrong kind (a full guard must refuse everything, the bare server nothing)", c.transport, c.path, c.rate, c.wrong)
		}
	}
	// Each row left its traces: the server's (its gate's state; shed has
	// a gate) and the client's, a header and rows every traceEvery.
	for _, r := range rep.rows {
		for side, col := range map[string]string{"server": "front_limit", "client": "good"} {
			b, err := os.ReadFile(traceName(o.trace, r.config, r.contender, r.caseName, side))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) < 2 || !strings.Contains(lines[0], col) {
				t.Errorf("%v %s trace: %d lines, header %q (want %q and rows)", r.config, side, len(lines), lines[0], col)
			}
		}
	}
	var buf bytes.Buffer
	rep.write(&buf)
	out := buf.String()
	for _, want := range []string{"## Capacity", "## Results", "| http | 1 | 200us | shed | 2x-warm |", "| grpc | 1 | 200us | shed | 2x-warm |", "## What a refusal costs the server", "| grpc | shed UNAVAILABLE |"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestProfilePace checks the open-loop pacing: the profile's steps send
// rate × duration requests each, and the profile stops at its end.
func TestProfilePace(t *testing.T) {
	p := profile{{100, time.Second}, {400, 500 * time.Millisecond}}
	var hits uint64
	elapsed := time.Duration(0)
	for {
		wait, stop := p.Pace(elapsed, hits)
		if stop {
			break
		}
		elapsed += wait
		if elapsed < time.Second {
			if got := p.Rate(elapsed); got != 100 {
				t.Fatalf("Rate(%v) = %v, want 100", elapsed, got)
			}
		}
		hits++
	}
	if hits != 300 {
		t.Errorf("sent %d requests, want 100 + 200", hits)
	}
	if elapsed != 1500*time.Millisecond {
		t.Errorf("last request at %v, want 1.5s", elapsed)
	}
	if w, _ := p.Pace(0, 0); w != 10*time.Millisecond {
		t.Errorf("first wait %v, want 10ms", w)
	}
}

// TestCLIErrors checks that bad flags are refused before anything starts.
func TestCLIErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-matrix", "http:0:1ms"},
		{"-matrix", "udp:1:1ms"},
		{"-matrix", "http:1:fast"},
		{"-contenders", "nobody"},
		{"-cases", "3x"},
	} {
		if code := cli(args, io.Discard, io.Discard); code != 2 {
			t.Errorf("cli(%q) = %d, want 2", args, code)
		}
	}
	var out bytes.Buffer
	if code := cli([]string{"-list"}, &out, io.Discard); code != 0 || !strings.Contains(out.String(), "shed-maxrtt") {
		t.Errorf("-list: code %d, output %q", code, out.String())
	}
}

// TestBusy checks the busy-machine warning's test on /proc/loadavg lines.
func TestBusy(t *testing.T) {
	n := runtime.NumCPU()
	for load, want := range map[string]bool{
		"0.00 0.01 0.05":                  false,
		fmt.Sprintf("%d.50 0.1 0.1", n):   true,
		fmt.Sprintf("%d.00 9.0 9.0", n-1): false,
		"?":                               false,
	} {
		if got := busy(load); got != want {
			t.Errorf("busy(%q) = %v, want %v", load, got, want)
		}
	}
}
