package manifest

import (
	"context"

	"github.com/dsh-container/dsh-container/registry"
)

// RegistryTool adapts a command tool to the registry: a call runs Exec
// with the call's arguments, its result is one text block, and an Exec
// error rejects the call with the error's message.
func (t Tool) RegistryTool() registry.Tool {
	return registry.Tool{
		Name:        t.Name,
		Description: t.Description,
		Parameters:  t.InputSchema,
		Annotations: t.Annotations.raw(),
		Execute: func(ctx context.Context, call registry.Execution) ([]registry.Block, error) {
			out, err := Exec(ctx, t, call.Arguments)
			if err != nil {
				return nil, err
			}
			return []registry.Block{registry.TextBlock(out)}, nil
		},
	}
}
