package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/internal/reporter"
	"github.com/formspec/formspec-hooks/internal/testkit/binaries"
	"github.com/formspec/formspec-hooks/internal/weburl"
)

// testVersion is stamped into the binaries TestCommandLineConventions
// builds, the way `make build` and the Dockerfile stamp VERSION.
const testVersion = "v0.0.0-clitest"

// buildBinaries returns the directory of the built commands, building them
// on first use; TestMain removes it.
func buildBinaries(t *testing.T) string {
	t.Helper()
	return binaries.Build(t, "../..", testVersion)
}

func TestMain(m *testing.M) {
	code := m.Run()
	binaries.Remove()
	os.Exit(code)
}

// urlPassword is the password, query value or fragment of the URLs some
// cases give: no output may repeat it.
const urlPassword = "hunter2-in-a-url"

// urlFlags are every URL flag of every binary, each with the arguments
// that get a command as far as checking it. Should the check let the URL
// through, the servers listen on the loopback only and the plugin finds
// no cluster.
var urlFlags = map[string]struct {
	command []string // the binary and its command
	args    []string // before the flag
	flag    string
}{
	"serve --cluster-control-url":                 {command: []string{"formspec-hooks", "serve"}, args: serveURLArgs, flag: "--cluster-control-url"},
	"serve --control-cluster-url":                 {command: []string{"formspec-hooks", "serve"}, args: serveURLArgs, flag: "--control-cluster-url"},
	"serve --reporter-url":                        {command: []string{"formspec-hooks", "serve"}, args: serveURLArgs, flag: "--reporter-url"},
	"render --cluster-control-url":                {command: []string{"formspec-hooks", "render"}, args: []string{"--default-version", "1.8.2", "-f", "/nonexistent.yaml"}, flag: "--cluster-control-url"},
	"render --control-cluster-url":                {command: []string{"formspec-hooks", "render"}, args: []string{"--default-version", "1.8.2", "-f", "/nonexistent.yaml"}, flag: "--control-cluster-url"},
	"reporter --cluster-control-url":              {command: []string{"formspec-reporter"}, args: reporterURLArgs, flag: "--cluster-control-url"},
	"reporter --interceptor-admin-url":            {command: []string{"formspec-reporter"}, args: append([]string{"--cluster-control-url", "http://127.0.0.1:1"}, reporterURLArgs...), flag: "--interceptor-admin-url"},
	"kubectl-formspec diff --cluster-control-url": {command: []string{"kubectl-formspec", "diff"}, args: []string{"--default-version", "1.8.2", "--kubeconfig", "/nonexistent/kubeconfig"}, flag: "--cluster-control-url"},
}

var (
	serveURLArgs    = []string{"--default-version", "1.8.2", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}
	reporterURLArgs = []string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--kubeconfig", "/nonexistent/kubeconfig"}
)

// TestCommandLineConventions runs every command of the three binaries, as
// built, the wrong way and the right way, and holds them to one convention
// (see internal/cliflag): --help prints the usage on stdout and exits 0; a
// usage error exits 2 and prints the error first, on stderr, then where to
// get help, and never the flag list; `version` and `--version` print the
// linked-in version and exit 0.
func TestCommandLineConventions(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not building the binaries")
	}
	bin := buildBinaries(t)
	type want struct {
		Code int
		// Stdout and Stderr are regular expressions the whole output
		// must match.
		Stdout, Stderr string
	}
	usageError := func(command, message string) want {
		return want{Code: 2, Stderr: `^` + regexp.QuoteMeta(command+": "+message) + `.*\nRun '` + regexp.QuoteMeta(command) + ` --help' for usage\.\n$`}
	}
	help := func(command string) want {
		return want{Code: 0, Stdout: `^Usage: ` + regexp.QuoteMeta(command) + `[ \n](.|\n)+$`}
	}
	// A startup failure after the starting line: the flag and its value,
	// never the name logs and metrics give the file.
	startupError := func(command, message string) want {
		return want{Code: 1, Stderr: `^time=\S+ level=INFO msg="formspec-hooks starting".*\n` + regexp.QuoteMeta(command+": "+message) + `\n$`}
	}
	// Under --log-format json every line on stderr is JSON, the last the
	// error, with a hint to --help for a usage error.
	jsonLine := `\{"time":"[^"]+","level":"[A-Z]+","msg":"[^"]+"[^\n]*\}\n`
	jsonUsageError := func(command, message string) want {
		return want{Code: 2, Stderr: `^\{"time":"[^"]+","level":"ERROR","msg":"invalid command line","command":"` + regexp.QuoteMeta(command) + `","err":"` +
			regexp.QuoteMeta(message) + `[^"\n]*","hint":"run '` + regexp.QuoteMeta(command) + ` --help' for usage"\}\n$`}
	}
	jsonStartupError := func(command, message string) want {
		return want{Code: 1, Stderr: `^(` + jsonLine + `)*\{"time":"[^"]+","level":"ERROR","msg":"exiting","command":"` + regexp.QuoteMeta(command) + `","err":"` +
			regexp.QuoteMeta(message) + `"\}\n$`}
	}
	version := func(program string) want {
		return want{Code: 0, Stdout: `^` + program + ` ` + regexp.QuoteMeta(testVersion) + ` \(revision \S+, go\S+\)\n$`}
	}
	cases := map[string]struct {
		args []string
		want want
	}{
		"hooks":                    {args: []string{"formspec-hooks"}, want: usageError("formspec-hooks", "missing command")},
		"hooks help":               {args: []string{"formspec-hooks", "--help"}, want: help("formspec-hooks")},
		"hooks -h":                 {args: []string{"formspec-hooks", "-h"}, want: help("formspec-hooks")},
		"hooks unknown command":    {args: []string{"formspec-hooks", "deploy"}, want: usageError("formspec-hooks", `unknown command "deploy"`)},
		"hooks unknown flag":       {args: []string{"formspec-hooks", "--nope"}, want: usageError("formspec-hooks", `unknown command "--nope"`)},
		"hooks version":            {args: []string{"formspec-hooks", "version"}, want: version("formspec-hooks")},
		"hooks --version":          {args: []string{"formspec-hooks", "--version"}, want: version("formspec-hooks")},
		"hooks version help":       {args: []string{"formspec-hooks", "version", "--help"}, want: help("formspec-hooks version")},
		"hooks version extra":      {args: []string{"formspec-hooks", "version", "extra"}, want: usageError("formspec-hooks version", `unexpected arguments ["extra"]`)},
		"serve help":               {args: []string{"formspec-hooks", "serve", "--help"}, want: help("formspec-hooks serve")},
		"serve unknown flag":       {args: []string{"formspec-hooks", "serve", "--nope"}, want: usageError("formspec-hooks serve", "flag provided but not defined: -nope")},
		"serve bad value":          {args: []string{"formspec-hooks", "serve", "--max-inflight", "many"}, want: usageError("formspec-hooks serve", `invalid value "many" for flag -max-inflight`)},
		"serve bad log level":      {args: []string{"formspec-hooks", "serve", "--log-level", "loud"}, want: usageError("formspec-hooks serve", `invalid value "loud" for flag -log-level`)},
		"serve extra":              {args: []string{"formspec-hooks", "serve", "extra"}, want: usageError("formspec-hooks serve", `unexpected arguments ["extra"]`)},
		"serve bad URL":            {args: []string{"formspec-hooks", "serve", "--default-version", "1.8.2", "--cluster-control-url", "ftp://x"}, want: usageError("formspec-hooks serve", "--cluster-control-url must be an http or https URL")},
		"serve URL password":       {args: []string{"formspec-hooks", "serve", "--default-version", "1.8.2", "--cluster-control-url", "https://ccuser:" + urlPassword + "@cc.example"}, want: usageError("formspec-hooks serve", "--cluster-control-url "+weburl.ErrUserinfo.Error())},
		"serve URL password bad":   {args: []string{"formspec-hooks", "serve", "--default-version", "1.8.2", "--cluster-control-url", "https://ccuser:" + urlPassword + "@cc.example/%zz"}, want: usageError("formspec-hooks serve", "--cluster-control-url must be an http or https URL: it does not parse")},
		"serve reporter password":  {args: []string{"formspec-hooks", "serve", "--default-version", "1.8.2", "--reporter-url", "http://sidecar:" + urlPassword + "@127.0.0.1:8181"}, want: usageError("formspec-hooks serve", "--reporter-url "+weburl.ErrUserinfo.Error())},
		"serve no version":         {args: []string{"formspec-hooks", "serve"}, want: usageError("formspec-hooks serve", "--default-version is required when --resource-image has no tag")},
		"serve version":            {args: []string{"formspec-hooks", "serve", "version"}, want: version("formspec-hooks")},
		"serve --version":          {args: []string{"formspec-hooks", "serve", "--version"}, want: version("formspec-hooks")},
		"serve TLS files":          {args: []string{"formspec-hooks", "serve", "--default-version", "1.8.2", "--tls-cert-file", "/nonexistent.crt", "--tls-key-file", "/nonexistent.key"}, want: startupError("formspec-hooks serve", "cannot read --tls-cert-file /nonexistent.crt and --tls-key-file /nonexistent.key: stat /nonexistent.crt: no such file or directory")},
		"serve token file":         {args: []string{"formspec-hooks", "serve", "--default-version", "1.8.2", "--auth-token-file", "/nonexistent.tokens"}, want: startupError("formspec-hooks serve", "cannot read --auth-token-file /nonexistent.tokens: stat /nonexistent.tokens: no such file or directory")},
		"serve JSON usage":         {args: []string{"formspec-hooks", "serve", "--log-format", "json"}, want: jsonUsageError("formspec-hooks serve", "--default-version is required when --resource-image has no tag")},
		"serve JSON bad flag":      {args: []string{"formspec-hooks", "serve", "--nope", "--log-format=json"}, want: jsonUsageError("formspec-hooks serve", "flag provided but not defined: -nope")},
		"serve JSON TLS files":     {args: []string{"formspec-hooks", "serve", "--log-format", "json", "--default-version", "1.8.2", "--tls-cert-file", "/nonexistent.crt", "--tls-key-file", "/nonexistent.key"}, want: jsonStartupError("formspec-hooks serve", "cannot read --tls-cert-file /nonexistent.crt and --tls-key-file /nonexistent.key: stat /nonexistent.crt: no such file or directory")},
		"render help":              {args: []string{"formspec-hooks", "render", "--help"}, want: help("formspec-hooks render")},
		"render unknown flag":      {args: []string{"formspec-hooks", "render", "--nope"}, want: usageError("formspec-hooks render", "flag provided but not defined: -nope")},
		"render extra":             {args: []string{"formspec-hooks", "render", "workspace.yaml"}, want: usageError("formspec-hooks render", `unexpected arguments ["workspace.yaml"]`)},
		"render missing file":      {args: []string{"formspec-hooks", "render", "--default-version", "1.8.2", "-f", "/nonexistent.yaml"}, want: want{Code: 1, Stderr: `^time=\S+ level=WARN msg="no --cluster-control-url.*\nformspec-hooks render: cannot read /nonexistent.yaml: .*\n$`}},
		"render log level":         {args: []string{"formspec-hooks", "render", "--log-level", "error", "-f", "/nonexistent.yaml"}, want: want{Code: 1, Stderr: `^formspec-hooks render: cannot read /nonexistent.yaml: .*\n$`}},
		"render log json":          {args: []string{"formspec-hooks", "render", "--log-format", "json", "-f", "/nonexistent.yaml"}, want: want{Code: 1, Stderr: `^\{"time":"[^"]+","level":"WARN","msg":"no --cluster-control-url[^\n]*\}\n\{"time":"[^"]+","level":"ERROR","msg":"exiting","command":"formspec-hooks render","err":"cannot read /nonexistent.yaml: [^\n]*\}\n$`}},
		"render URL password":      {args: []string{"formspec-hooks", "render", "--default-version", "1.8.2", "--cluster-control-url", "https://ccuser:" + urlPassword + "@cc.example"}, want: usageError("formspec-hooks render", "--cluster-control-url "+weburl.ErrUserinfo.Error())},
		"render no version":        {args: []string{"formspec-hooks", "render", "-f", "/nonexistent.yaml"}, want: want{Code: 1, Stderr: `^time=\S+ level=WARN msg="no --cluster-control-url.*\nformspec-hooks render: cannot read /nonexistent.yaml: .*\n$`}},
		"claim":                    {args: []string{"formspec-hooks", "claim"}, want: usageError("formspec-hooks claim", "missing subcommand")},
		"claim help":               {args: []string{"formspec-hooks", "claim", "--help"}, want: help("formspec-hooks claim")},
		"claim unknown":            {args: []string{"formspec-hooks", "claim", "forge"}, want: usageError("formspec-hooks claim", `unknown subcommand "forge"`)},
		"claim keygen help":        {args: []string{"formspec-hooks", "claim", "keygen", "--help"}, want: help("formspec-hooks claim keygen")},
		"claim keygen no out":      {args: []string{"formspec-hooks", "claim", "keygen"}, want: usageError("formspec-hooks claim keygen", "keygen needs --out FILE")},
		"claim keygen bad flag":    {args: []string{"formspec-hooks", "claim", "keygen", "--nope"}, want: usageError("formspec-hooks claim keygen", "flag provided but not defined: -nope")},
		"claim sign help":          {args: []string{"formspec-hooks", "claim", "sign", "--help"}, want: help("formspec-hooks claim sign")},
		"claim sign no key":        {args: []string{"formspec-hooks", "claim", "sign"}, want: usageError("formspec-hooks claim sign", "sign needs --key FILE")},
		"claim sign bad format":    {args: []string{"formspec-hooks", "claim", "sign", "--key", "k", "--format", "v3"}, want: usageError("formspec-hooks claim sign", `--format must be v1 or v2, not "v3"`)},
		"claim sign bad expiry":    {args: []string{"formspec-hooks", "claim", "sign", "--key", "k", "--expires-in", "-1h"}, want: usageError("formspec-hooks claim sign", "--expires-in must be 0 (no expiry) or at least 1s")},
		"claim verify help":        {args: []string{"formspec-hooks", "claim", "verify", "--help"}, want: help("formspec-hooks claim verify")},
		"claim verify no files":    {args: []string{"formspec-hooks", "claim", "verify"}, want: usageError("formspec-hooks claim verify", "verify needs --claim, --datastore and --secret")},
		"claim verify missing":     {args: []string{"formspec-hooks", "claim", "verify", "--claim", "/nonexistent", "--datastore", "d", "--secret", "s"}, want: want{Code: 1, Stderr: `^formspec-hooks claim: cannot read /nonexistent: .*\n$`}},
		"claim digest help":        {args: []string{"formspec-hooks", "claim", "digest", "--help"}, want: help("formspec-hooks claim digest")},
		"claim digest two claims":  {args: []string{"formspec-hooks", "claim", "digest", "a.yaml", "b.yaml"}, want: usageError("formspec-hooks claim digest", "digest takes at most one claim file")},
		"reporter help":            {args: []string{"formspec-reporter", "--help"}, want: help("formspec-reporter")},
		"reporter unknown flag":    {args: []string{"formspec-reporter", "--nope"}, want: usageError("formspec-reporter", "flag provided but not defined: -nope")},
		"reporter extra":           {args: []string{"formspec-reporter", "extra"}, want: usageError("formspec-reporter", `unexpected arguments ["extra"]`)},
		"reporter bad log format":  {args: []string{"formspec-reporter", "--log-format", "xml"}, want: usageError("formspec-reporter", `invalid value "xml" for flag -log-format`)},
		"reporter URL password":    {args: []string{"formspec-reporter", "--cluster-control-url", "https://ccuser:" + urlPassword + "@cc.example"}, want: usageError("formspec-reporter", "--cluster-control-url "+weburl.ErrUserinfo.Error())},
		"reporter version":         {args: []string{"formspec-reporter", "version"}, want: version("formspec-reporter")},
		"reporter JSON usage":      {args: []string{"formspec-reporter", "--log-format", "json"}, want: jsonUsageError("formspec-reporter", "--cluster-control-url is required")},
		"reporter CA file":         {args: []string{"formspec-reporter", "--cluster-control-url", "http://127.0.0.1:1", "--kubeconfig", "", "--ca-file", "/nonexistent.ca", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, want: want{Code: 1, Stderr: `(?s)^.*\nformspec-reporter: cannot read --ca-file /nonexistent.ca: stat /nonexistent.ca: no such file or directory\n$`}},
		"reporter --version":       {args: []string{"formspec-reporter", "--version"}, want: version("formspec-reporter")},
		"reporter http token":      {args: []string{"formspec-reporter", "--cluster-control-url", "http://10.0.0.1:7070", "--token-file", "/nonexistent.token"}, want: usageError("formspec-reporter", "--cluster-control-url "+reporter.ErrPlainHTTP.Error())},
		"clustercontrol help":      {args: []string{"formspec-clustercontrol", "--help"}, want: help("formspec-clustercontrol")},
		"clustercontrol bad flag":  {args: []string{"formspec-clustercontrol", "--nope"}, want: usageError("formspec-clustercontrol", "flag provided but not defined: -nope")},
		"clustercontrol extra":     {args: []string{"formspec-clustercontrol", "extra"}, want: usageError("formspec-clustercontrol", `unexpected arguments ["extra"]`)},
		"clustercontrol version":   {args: []string{"formspec-clustercontrol", "version"}, want: version("formspec-clustercontrol")},
		"clustercontrol JSON":      {args: []string{"formspec-clustercontrol", "--log-format", "json", "--admin-listen", "", "--auth-token-file", "/nonexistent.tokens"}, want: jsonStartupError("formspec-clustercontrol", "cannot read --auth-token-file: open /nonexistent.tokens: no such file or directory")},
		"clustercontrol open API":  {args: []string{"formspec-clustercontrol", "--listen", "0.0.0.0:0", "--admin-listen", ""}, want: usageError("formspec-clustercontrol", "--listen 0.0.0.0:0 is not a loopback address: it needs --auth-token-file")},
		"clustercontrol no admin":  {args: []string{"formspec-clustercontrol"}, want: usageError("formspec-clustercontrol", "--admin-listen needs --admin-token-file")},
		"clustercontrol --version": {args: []string{"formspec-clustercontrol", "--version"}, want: version("formspec-clustercontrol")},
	}
	// A query or a fragment, where a token gets pasted, is a usage error
	// naming the flag, and the value is not repeated.
	for name, f := range urlFlags {
		command := strings.Join(f.command, " ")
		if f.command[0] == "kubectl-formspec" {
			command = "kubectl formspec " + strings.Join(f.command[1:], " ")
		}
		for part, url := range map[string]string{"query": "http://127.0.0.1:7070/?token=" + urlPassword, "fragment": "http://127.0.0.1:7070/#" + urlPassword} {
			args := append(slices.Concat(f.command, f.args), f.flag, url)
			cases[name+" "+part] = struct {
				args []string
				want want
			}{args: args, want: usageError(command, f.flag+" "+weburl.ErrQuery.Error())}
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// A server that starts when it should not is stopped, and
			// fails on its exit code.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(bin, tc.args[0]), tc.args[1:]...)
			// Nothing a case runs reaches beyond the loopback, whatever
			// address it is given (10.0.0.1): Go's clients send every
			// other host to this proxy, where nothing listens.
			cmd.Env = append(os.Environ(), "HTTP_PROXY=http://127.0.0.1:1", "HTTPS_PROXY=http://127.0.0.1:1",
				"http_proxy=http://127.0.0.1:1", "https_proxy=http://127.0.0.1:1", "NO_PROXY=", "no_proxy=")
			cmd.Dir = t.TempDir()
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			if exit, ok := errors.AsType[*exec.ExitError](err); ok {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want.Code, code); diff != "" {
				t.Errorf("%s: exit code -want, +got:\n%s\nstderr: %s", strings.Join(tc.args, " "), diff, stderr.String())
			}
			if strings.Contains(stdout.String()+stderr.String(), urlPassword) {
				t.Errorf("%s: the output repeats the password of a URL given:\n%s%s", strings.Join(tc.args, " "), stdout.String(), stderr.String())
			}
			for _, o := range []struct{ name, re, got string }{
				{"stdout", tc.want.Stdout, stdout.String()},
				{"stderr", tc.want.Stderr, stderr.String()},
			} {
				re := o.re
				if re == "" {
					re = `^$`
				}
				if !regexp.MustCompile(re).MatchString(o.got) {
					t.Errorf("%s: %s does not match %q:\n%s", strings.Join(tc.args, " "), o.name, re, o.got)
				}
			}
		})
	}
}
