package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// serverProc is a running server process.
type serverProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// stdout is the writing end of the pipe the server's output is copied
	// into; stop closes it so the reader ends.
	stdout *io.PipeWriter
	hello  serverHello
	admin  *http.Client
}

// startServer re-executes this binary as a server (serverEnv) with
// GOMAXPROCS=cores and waits until it listens.
func startServer(cfg serverConfig, cores int) (*serverProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), serverEnv+"="+string(b), "GOMAXPROCS="+strconv.Itoa(cores))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, pw := io.Pipe()
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &serverProc{cmd: cmd, stdin: stdin, stdout: pw, admin: &http.Client{Timeout: 5 * time.Second}}
	line := make(chan error, 1)
	go func() {
		// Read the hello, then drain stdout so the server never blocks on it.
		r := bufio.NewReader(stdout)
		s, err := r.ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(s, &p.hello)
		}
		line <- err
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case err = <-line:
	case <-time.After(30 * time.Second):
		err = errors.New("no hello within 30 s")
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("server %+v: %w", cfg, err)
	}
	return p, nil
}

// stats asks the server's admin endpoint for its counters.
func (p *serverProc) stats(ctx context.Context) (serverStats, error) {
	var s serverStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.hello.Admin+"/stats", nil)
	if err != nil {
		return s, err
	}
	resp, err := p.admin.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&s)
	return s, err
}

// stop ends the server: it kills it at once (a server left with a backlog
// of work would take its time to notice its stdin closing, and it has
// nothing to save) and waits for it to exit. Its stdin is closed too: a
// server whose harness dies without calling stop exits at that EOF.
func (p *serverProc) stop() {
	_ = p.stdin.Close()
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	_ = p.stdout.Close()
	p.admin.CloseIdleConnections()
}
