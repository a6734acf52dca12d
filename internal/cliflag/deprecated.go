package cliflag

import (
	"flag"
	"strings"
)

// deprecatedPrefix starts the usage of every deprecated alias; --help
// shows it, and WarnDeprecated finds the aliases by it.
const deprecatedPrefix = "deprecated: use --"

// Deprecate registers old as a deprecated alias of the flag name, which
// must be registered already: both set the same value, so scripts and
// manifests written for the old name keep working, and --help tells them
// the new one. Every binary names one idea one way; an old name is kept
// this way, and listed in the CHANGELOG, rather than removed.
func Deprecate(fs *flag.FlagSet, old, name string) {
	f := fs.Lookup(name)
	if f == nil {
		panic("cliflag: no flag --" + name + " to alias as --" + old)
	}
	fs.Var(f.Value, old, deprecatedPrefix+name)
}

// WarnDeprecated calls warn once for each deprecated alias that was set,
// naming its replacement.
func WarnDeprecated(fs *flag.FlagSet, warn func(string)) {
	fs.Visit(func(f *flag.Flag) {
		if name, ok := strings.CutPrefix(f.Usage, deprecatedPrefix); ok {
			warn("flag --" + f.Name + " is deprecated; use --" + name)
		}
	})
}

// Given is the spelling a flag's value came in, for its errors: "--old"
// when only the deprecated alias old of name was set, else "--name".
func Given(fs *flag.FlagSet, name string) string {
	newSet, oldName := false, ""
	fs.Visit(func(f *flag.Flag) {
		switch {
		case f.Name == name:
			newSet = true
		case f.Usage == deprecatedPrefix+name:
			oldName = f.Name
		}
	})
	if oldName != "" && !newSet {
		return "--" + oldName
	}
	return "--" + name
}
