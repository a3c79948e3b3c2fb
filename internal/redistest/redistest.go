// Package redistest starts real redis-server processes on free loopback
// ports for tests: a single server, and a three-master Redis Cluster. The
// servers keep nothing on disk and are killed when the test ends. It needs
// redis-server (and, for a cluster, redis-cli) on the PATH; the repository's
// scripts/ensure-redis.sh installs them.
package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a redis-server process owned by a test.
type Server struct {
	t    testing.TB
	Addr string // host:port
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
}

// Start starts a redis-server on a free loopback port and stops it when t
// ends. extra arguments are passed to redis-server.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	s, err := launch(t.TempDir(), extra...)
	if err != nil {
		t.Fatal(err)
	}
	s.t = t
	t.Cleanup(s.Kill)
	return s
}

// Launch starts a redis-server on a free loopback port outside any test
// (for a TestMain, whose examples need a server); Close stops it.
func Launch() (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest")
	if err != nil {
		return nil, err
	}
	s, err := launch(dir)
	if err != nil {
		os.RemoveAll(dir)
	}
	return s, err
}

// Close kills a server made by Launch and removes its directory.
func (s *Server) Close() {
	s.Kill()
	os.RemoveAll(s.dir)
}

func launch(dir string, extra ...string) (*Server, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server not found (run scripts/ensure-redis.sh): %v", err)
	}
	s := &Server{dir: dir}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s.port = port
		s.Addr = "127.0.0.1:" + strconv.Itoa(s.port)
		s.args = append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", s.dir, "--protected-mode", "no"}, extra...)
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("starting redis-server: %v", lastErr)
}

func (s *Server) start() error {
	s.cmd = exec.Command("redis-server", s.args...)
	s.cmd.Dir = s.dir
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	log, err := os.Create(filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", time.Now().UnixNano())))
	if err != nil {
		return err
	}
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		log.Close()
		return err
	}
	go func(c *exec.Cmd) { c.Wait(); log.Close() }(s.cmd)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if Ping(s.Addr) == nil {
			return nil
		}
		if s.cmd.ProcessState != nil {
			break
		}
		time.Sleep(10 * time.Millisecond) // waiting for a process to listen, not timing a test
	}
	s.cmd.Process.Kill()
	return fmt.Errorf("redis-server on %s did not answer PING", s.Addr)
}

// Kill kills the server with SIGKILL (as kill -9) and waits until it is
// gone.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	for range 500 {
		if Ping(s.Addr) != nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	s.cmd = nil
}

// Restart starts the server again on the same port, empty.
func (s *Server) Restart() {
	s.t.Helper()
	var err error
	for range 50 {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond) // the port may linger after the kill
	}
	if s.t == nil {
		panic(fmt.Sprintf("redistest: restarting redis-server: %v", err))
	}
	s.t.Fatalf("restarting redis-server: %v", err)
}

// Cluster is a Redis Cluster of three masters on loopback ports.
type Cluster struct {
	Servers []*Server
	Addrs   []string
}

// StartCluster starts three redis-server processes in cluster mode, joins
// them with redis-cli --cluster create and waits until the cluster is ok.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatalf("redis-cli not found (run scripts/ensure-redis.sh): %v", err)
	}
	c := &Cluster{}
	for i := range 3 {
		s := Start(t, "--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("nodes-%d.conf", i),
			"--cluster-node-timeout", "2000")
		c.Servers = append(c.Servers, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ok := true
		for _, a := range c.Addrs {
			info, err := command(a, "CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				ok = false
			}
		}
		if ok {
			return c
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("redis cluster did not reach cluster_state:ok")
	return nil
}

// Ping sends PING to addr over a fresh connection.
func Ping(addr string) error {
	out, err := command(addr, "PING")
	if err == nil && out != "PONG" {
		err = fmt.Errorf("PING answered %q", out)
	}
	return err
}

// command sends one command in RESP and returns a simple or bulk reply.
func command(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"):
		return line[1:], nil
	case strings.HasPrefix(line, "-"):
		return "", fmt.Errorf("redis: %s", line[1:])
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("redis: bad bulk %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return line, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
