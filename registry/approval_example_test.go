package registry_test

import (
	"context"
	"fmt"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry"
	"github.com/dsh-container/dsh-container/registry/registrytest"
)

// A guard answers "ask" for one tool; the approver denies Atlantis and
// allows the rest. The program's denied call is a rejection it can catch,
// and each decision is a tool/approval event.
func ExampleWithApprover() {
	ask := func(_ context.Context, exec registry.Execution) error {
		if exec.Name == "weather" {
			return registry.Ask("weather calls need a human")
		}
		return nil
	}
	approver := registry.ApproverFunc(func(_ context.Context, req registry.ApprovalRequest) (registry.Approval, error) {
		if string(req.Exec.Arguments) == `{"city":"Atlantis"}` {
			return registry.Approval{Decision: registry.DecisionDeny, Reason: "not there"}, nil
		}
		return registry.Approval{Decision: registry.DecisionAllow}, nil
	})
	reg := registry.New(
		registry.WithMode(registry.ModeCode),
		registry.WithRuntime(registrytest.New(backend.TypeScript)),
		registry.WithGuard(ask),
		registry.WithApprover(approver),
		registry.WithEventSink(func(e registry.Event) {
			if e.Type == registry.EventApproval {
				fmt.Printf("event: %s %s %q\n", e.Tool, e.Decision, e.Reason)
			}
		}),
	)
	if err := reg.Register(weather); err != nil {
		panic(err)
	}
	res := reg.Execute(context.Background(), registry.Call{ID: "c1", Name: registry.RunCode,
		Arguments: []byte(`{"code":"try weather {\"city\":\"Oslo\"}\ntry weather {\"city\":\"Atlantis\"}"}`)})
	fmt.Println(res.Text())
	// Output:
	// event: weather allow ""
	// event: weather deny "not there"
	// Oslo: 21°C, clear
	// error: tool "weather" denied: not there
}
