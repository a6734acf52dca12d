package workspace

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
)

// ErrNoVersion is ParseImage's answer when neither the image reference nor
// the default version names a tag.
var ErrNoVersion = errors.New("--default-version is required when --resource-image has no tag: Workspaces without spec.version need a version, and there is no implicit latest")

// ParseImage splits a tag off an image reference, for the --resource-image
// and --default-version of serve and render (its errors name the flags):
// the hooks build "<repository>:<version>", so version is defaultVersion
// when set, else the reference's tag. With neither it is ErrNoVersion: the runtime would
// read a bare reference as "latest", which names no version and changes
// under running workspaces, so the operator has to choose one. A digest
// cannot be honoured and is refused rather than silently producing an
// invalid reference. A colon after the last slash is a tag; one before it
// is a registry port. With ErrNoVersion the repository is still returned,
// for render, which needs a version only for a Workspace without one.
func ParseImage(image, defaultVersion string) (repository, version string, err error) {
	if image == "" {
		return "", "", errors.New("--resource-image must not be empty")
	}
	if strings.Contains(image, "@") {
		return "", "", fmt.Errorf("--resource-image %q has a digest; give the repository and set the tag as --default-version", image)
	}
	repository, tag := image, ""
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		repository, tag = image[:i], image[i+1:]
	}
	version = cmp.Or(defaultVersion, tag)
	if version == "" {
		return repository, "", ErrNoVersion
	}
	return repository, version, nil
}
