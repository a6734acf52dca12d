package main

import (
	"context"
	"io"

	"github.com/formspec/formspec-hooks/internal/claimcli"
)

// runClaim is "formspec-hooks claim keygen|sign|verify|digest"; the logic
// and its tests live in internal/claimcli.
func runClaim(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return claimcli.Run(ctx, args, stdin, stdout, stderr)
}
