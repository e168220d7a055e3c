package registry

import "fmt"

// classedError is an error of an errdefs class whose message is only its
// own: the model and users read "tool \"x\" is not available", while
// errdefs.IsNotFound still recognizes it.
type classedError struct {
	class error
	err   error
}

func (e *classedError) Error() string   { return e.err.Error() }
func (e *classedError) Unwrap() []error { return []error{e.class, e.err} }

// errorf formats an error of the given errdefs class. %w works in format.
func errorf(class error, format string, args ...any) error {
	return &classedError{class: class, err: fmt.Errorf(format, args...)}
}
