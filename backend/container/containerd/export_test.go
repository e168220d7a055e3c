package containerd

import "context"

// SetCreateHook sets the hook that sees each engine answer of d's
// creates (see Driver.createHook); nil removes it. Set it before the
// creates it should see, never during one.
func SetCreateHook(d *Driver, hook func(ctx context.Context, end context.CancelFunc, step string, err error) error) {
	d.createHook = hook
}
