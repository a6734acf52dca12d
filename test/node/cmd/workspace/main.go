// Command workspace stands in for the resource image a Workspace runs, in
// the one-node test cluster: it answers HTTP on :8080 with what a test needs
// to see from inside the pod.
//
//	GET /          ok
//	GET /env       the environment, one NAME=value a line, sorted
//	GET /bindings  every file under /bindings, as path: content lines, sorted
//
// It prints the same on its standard output at start, so that kubectl logs
// shows them too. It is a test image: it shows credentials on purpose.
//
// Like a real server behind a Service, it keeps serving for shutdownDelay
// after SIGTERM (while endpoints are updated) before it stops: that is the
// window in which a workspace's teardown must not remove what the pod
// still uses.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// bindingRoot is where the hooks mount claim credentials.
const bindingRoot = "/bindings"

// shutdownDelay is how long the server keeps serving after SIGTERM.
const shutdownDelay = 2 * time.Second

func main() {
	writeEnv(os.Stdout)
	writeBindings(os.Stdout)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /env", func(w http.ResponseWriter, _ *http.Request) { writeEnv(w) })
	mux.HandleFunc("GET /bindings", func(w http.ResponseWriter, _ *http.Request) { writeBindings(w) })
	srv := &http.Server{
		Addr:              ":8080",
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    1 << 16,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		time.Sleep(shutdownDelay)
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

func writeEnv(w io.Writer) {
	env := os.Environ()
	slices.Sort(env)
	for _, kv := range env {
		fmt.Fprintln(w, kv)
	}
}

// writeBindings lists the regular files under bindingRoot; the kubelet's
// ..data symlinks and timestamped directories are skipped, so each file
// appears once, under the path the application reads.
func writeBindings(w io.Writer) {
	var lines []string
	_ = filepath.WalkDir(bindingRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), "..") {
			return filepath.SkipDir
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), "..") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		lines = append(lines, fmt.Sprintf("%s: %s", p, data))
		return nil
	})
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}
