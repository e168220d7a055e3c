package registry

import "github.com/containerd/errdefs"

// Mode is how the registry presents its tools to the model.
type Mode string

const (
	// ModeNative offers every visible tool as a native function schema.
	ModeNative Mode = "native"
	// ModeCode offers only run_code, plus the SDK prompt section.
	ModeCode Mode = "code"
	// ModeBoth offers the native schemas and run_code with the SDK section.
	ModeBoth Mode = "both"
)

// Modes lists the valid modes, the default first.
func Modes() []Mode { return []Mode{ModeNative, ModeCode, ModeBoth} }

// ParseMode validates s as a Mode. The empty string is the default,
// ModeNative. Errors wrap errdefs.ErrInvalidArgument.
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return ModeNative, nil
	}
	for _, m := range Modes() {
		if string(m) == s {
			return m, nil
		}
	}
	return "", errorf(errdefs.ErrInvalidArgument, "unknown tool presentation mode %q (valid: native, code, both)", s)
}

// codeMode reports whether the mode presents run_code.
func (m Mode) codeMode() bool { return m == ModeCode || m == ModeBoth }
