package node

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Stage is what the final stage of a Dockerfile puts into its image: the
// parts the test image reproduces without a container build.
type Stage struct {
	// From is the base image.
	From string
	// Copies are the COPY instructions, in order.
	Copies []Copy
	// User, Entrypoint, Cmd, WorkingDir, Env, Labels and ExposedPorts are
	// the image configuration the instructions of the same names set.
	User       string
	Entrypoint []string
	Cmd        []string
	WorkingDir string
	// WorkingDirUser is the USER in effect at the last WORKDIR: BuildKit
	// creates a missing working directory owned by it.
	WorkingDirUser string
	Env            []string
	Labels         map[string]string
	ExposedPorts   []string
}

// Copy is one COPY instruction.
type Copy struct {
	From    string // the --from stage, "" for the build context
	Sources []string
	Dest    string
}

// ParseFinalStage reads the Dockerfile at path and returns its final stage,
// with buildArgs given to its ARGs as --build-arg would (an ARG keeps its
// default when buildArgs has no value for it). It understands exactly the instructions a final stage that copies built
// binaries onto a base image needs (FROM, ARG, COPY, USER, EXPOSE, ENV,
// WORKDIR, LABEL, and ENTRYPOINT and CMD in JSON form) and rejects any
// other, so that an instruction the test image could not reproduce (a RUN,
// a shell-form ENTRYPOINT) fails the build of the test image instead of
// being silently left out.
func ParseFinalStage(path string, buildArgs map[string]string) (*Stage, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	insts := instructions(string(data))
	last := -1
	for i, inst := range insts {
		if word, _, _ := strings.Cut(inst, " "); strings.EqualFold(word, "FROM") {
			last = i
		}
	}
	if last < 0 {
		return nil, fmt.Errorf("%s: no FROM", path)
	}
	var stage *Stage
	var args map[string]string
	for _, inst := range insts[last:] {
		word, rest, _ := strings.Cut(inst, " ")
		rest = strings.TrimSpace(rest)
		word = strings.ToUpper(word)
		if word == "FROM" {
			f := strings.Fields(rest)
			stage = &Stage{From: f[0], Labels: map[string]string{}}
			args = map[string]string{} // an ARG is scoped to its stage
			continue
		}
		expand := func(s string) string {
			return os.Expand(s, func(k string) string { return args[k] })
		}
		switch word {
		case "ARG":
			k, v, _ := strings.Cut(rest, "=")
			args[k] = strings.Trim(v, `"`)
			if given, ok := buildArgs[k]; ok {
				args[k] = given
			}
		case "COPY":
			f := strings.Fields(rest)
			var c Copy
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				if v, ok := strings.CutPrefix(f[0], "--from="); ok {
					c.From = v
				} else {
					return nil, fmt.Errorf("%s: COPY option %s is not supported", path, f[0])
				}
				f = f[1:]
			}
			if len(f) < 2 {
				return nil, fmt.Errorf("%s: COPY %s: want sources and a destination", path, rest)
			}
			c.Sources, c.Dest = f[:len(f)-1], f[len(f)-1]
			stage.Copies = append(stage.Copies, c)
		case "USER":
			stage.User = expand(rest)
		case "WORKDIR":
			stage.WorkingDir = expand(rest)
			stage.WorkingDirUser = stage.User
		case "EXPOSE":
			for _, p := range strings.Fields(rest) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				stage.ExposedPorts = append(stage.ExposedPorts, p)
			}
		case "ENV":
			pairs, err := keyValues(expand(rest))
			if err != nil {
				return nil, fmt.Errorf("%s: ENV: %w", path, err)
			}
			for _, kv := range pairs {
				stage.Env = append(stage.Env, kv[0]+"="+kv[1])
			}
		case "LABEL":
			pairs, err := keyValues(expand(rest))
			if err != nil {
				return nil, fmt.Errorf("%s: LABEL: %w", path, err)
			}
			for _, kv := range pairs {
				stage.Labels[kv[0]] = kv[1]
			}
		case "ENTRYPOINT", "CMD":
			var list []string
			if err := json.Unmarshal([]byte(rest), &list); err != nil {
				return nil, fmt.Errorf("%s: %s must be in JSON form (the image has no shell): %w", path, word, err)
			}
			if word == "ENTRYPOINT" {
				stage.Entrypoint = list
			} else {
				stage.Cmd = list
			}
		default:
			return nil, fmt.Errorf("%s: %s in the final stage cannot be reproduced by the test image (see test/node/images.go)", path, word)
		}
	}
	return stage, nil
}

// instructions splits a Dockerfile into instructions, joining continued
// lines and dropping comments and blank lines.
func instructions(data string) []string {
	var out []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		out = append(out, strings.TrimSpace(cur.String()))
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, strings.TrimSpace(cur.String()))
	}
	return out
}

// keyValues parses key=value pairs separated by spaces, with double-quoted
// values.
func keyValues(s string) ([][2]string, error) {
	var out [][2]string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		k, rest, ok := strings.Cut(s, "=")
		if !ok || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("%q: want key=value", s)
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			end := 1
			for end < len(rest) && (rest[end] != '"' || rest[end-1] == '\\') {
				end++
			}
			if end == len(rest) {
				return nil, fmt.Errorf("%q: unterminated quote", s)
			}
			v = strings.ReplaceAll(rest[1:end], `\"`, `"`)
			rest = rest[end+1:]
		} else {
			v, rest, _ = strings.Cut(rest, " ")
		}
		out = append(out, [2]string{strings.Trim(k, `"`), v})
		s = rest
	}
	return out, nil
}
