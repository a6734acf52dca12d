package main

import (
	"context"
	"io"

	"github.com/formspec/formspec-hooks/hooks/claims/cli"
)

// runClaim is "formspec-hooks claim keygen|sign|verify|digest"; the logic
// and its tests live in hooks/claims/cli.
func runClaim(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return cli.Run(ctx, args, stdin, stdout, stderr)
}
