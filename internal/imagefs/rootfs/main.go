// Command rootfs writes the image's files besides its binaries
// (internal/imagefs) into a directory; the Dockerfile's build stage runs it
// and copies the directory onto an empty image.
//
//	go run ./internal/imagefs/rootfs /rootfs
package main

import (
	"fmt"
	"os"

	"github.com/formspec/formspec-hooks/internal/imagefs"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: rootfs DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "rootfs:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	goroot, err := imagefs.GOROOT()
	if err != nil {
		return err
	}
	files, err := imagefs.Files(goroot)
	if err != nil {
		return err
	}
	return imagefs.Write(dir, files)
}
