// Command imagearchive writes the project's image as `make release` ships
// it: an OCI archive of one image for several platforms, each built as the
// Dockerfile describes (node.HooksImageFrom), without a container builder
// or registry. It prints the image index's digest, which the chart and
// install.yaml pin.
//
//	go run ./cmd/imagearchive -root ../.. -name ghcr.io/formspec/formspec-hooks:0.1.0 \
//	  -arch amd64,arm64 -build-arg VERSION=0.1.0 -build-arg REVISION=$(git rev-parse HEAD) \
//	  -build-arg SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) \
//	  -out ../../dist/formspec-hooks-image-0.1.0.oci.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	node "github.com/formspec/formspec-hooks/test/node"
)

// buildArgs is a repeatable -build-arg KEY=VALUE.
type buildArgs map[string]string

func (b buildArgs) String() string { return fmt.Sprint(map[string]string(b)) }

func (b buildArgs) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	b[k] = v
	return nil
}

func main() {
	root := flag.String("root", "", "the repository (its Dockerfile and ./cmd)")
	out := flag.String("out", "", "the archive to write")
	name := flag.String("name", "", "the image's name, repository:tag")
	archs := flag.String("arch", "amd64,arm64", "comma-separated GOARCH values, one platform each (linux)")
	args := buildArgs{}
	flag.Var(args, "build-arg", "a Dockerfile build argument, KEY=VALUE (repeatable)")
	flag.Parse()
	if *root == "" || *out == "" || *name == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: imagearchive -root DIR -name REPOSITORY:TAG -out FILE [-arch LIST] [-build-arg KEY=VALUE]...")
		os.Exit(2)
	}
	digest, err := write(*root, *out, *name, strings.Split(*archs, ","), args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagearchive:", err)
		os.Exit(1)
	}
	fmt.Println(digest)
}

func write(root, out, name string, archs []string, args map[string]string) (string, error) {
	work, err := os.MkdirTemp("", "imagearchive-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(work) }()
	var images []node.Image
	for _, arch := range archs {
		img, err := node.HooksImageFrom(root, work, node.Build{Arch: arch, Args: args})
		if err != nil {
			return "", fmt.Errorf("linux/%s: %w", arch, err)
		}
		images = append(images, img)
	}
	return node.WriteOCIArchive(out, name, images...)
}
