package workspace

import (
	"errors"
	"fmt"
	"strings"
)

// ParseImage splits a tag off an image reference, for the server's
// --resource-image and --default-version: the hooks build
// "<repository>:<version>", so version is defaultVersion when set, else
// the reference's tag, else "latest". A digest cannot be honoured and is
// refused rather than silently producing an invalid reference. A colon
// after the last slash is a tag; one before it is a registry port.
func ParseImage(image, defaultVersion string) (repository, version string, err error) {
	if image == "" {
		return "", "", errors.New("the image must not be empty")
	}
	if strings.Contains(image, "@") {
		return "", "", fmt.Errorf("image %q has a digest; give the repository and set the tag as the default version", image)
	}
	repository, tag := image, ""
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		repository, tag = image[:i], image[i+1:]
	}
	switch {
	case defaultVersion != "":
		version = defaultVersion
	case tag != "":
		version = tag
	default:
		// Matches what a bare image reference means to a container
		// runtime; pin a version in production.
		version = "latest"
	}
	return repository, version, nil
}
