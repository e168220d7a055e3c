package registry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry"
	"github.com/dsh-container/dsh-container/registry/registrytest"
)

// weather is a tool used by the examples.
var weather = registry.Tool{
	Name:        "weather",
	Description: "Current weather for a city.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
	Execute: func(ctx context.Context, exec registry.Execution) ([]registry.Block, error) {
		var args struct{ City string }
		if err := json.Unmarshal(exec.Arguments, &args); err != nil {
			return nil, err
		}
		if args.City == "Atlantis" {
			return nil, fmt.Errorf("no station in %s", args.City)
		}
		return []registry.Block{registry.TextBlock(args.City + ": 21°C, clear")}, nil
	},
}

func ExampleRegistry_Register() {
	reg := registry.New() // ModeNative
	if err := reg.Register(weather); err != nil {
		fmt.Println(err)
	}
	fmt.Println(reg.Register(registry.Tool{Name: "run_code", Execute: weather.Execute}))

	res := reg.Execute(context.Background(), registry.Call{
		ID: "call-1", Name: "weather", Arguments: json.RawMessage(`{"city":"Lisbon"}`),
	})
	fmt.Println(res.IsError, res.Text())
	// Output:
	// register tool "run_code": "run_code" is reserved for the Code Mode transport
	// false Lisbon: 21°C, clear
}

func ExampleRegistry_Assemble() {
	reg := registry.New(
		registry.WithMode(registry.ModeCode),
		registry.WithRuntime(registrytest.New(backend.Python)),
	)
	reg.Register(weather)
	reg.Register(registry.Tool{Name: "delete_everything", Execute: weather.Execute})

	// The scope hides a tool from both the SDK and the program's bindings;
	// run_code stays whatever the restrictions say.
	scope := registry.Scope{}.Restrict(registry.Deny("delete_everything", "run_code"))
	asm, err := reg.Assemble(context.Background(), scope)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range asm.Tools {
		fmt.Println("tool:", t.Name, "-", strings.SplitN(t.Description, ".", 2)[0])
	}
	for _, s := range asm.Sections {
		fmt.Println("section:", s.Name)
	}

	_, err = registry.New(registry.WithMode(registry.ModeBoth)).Assemble(context.Background(), registry.Scope{})
	fmt.Println(err)
	// Output:
	// tool: run_code - Run a Python program against the tools SDK described in the system prompt
	// section: tools:sdk
	// assemble tools: tool mode "both" needs a code runtime and none is configured (known languages: python, typescript)
}

func ExampleRegistry_Execute_runCode() {
	// An in-memory runtime stands in for the container runtime: the program
	// text is mapped to a Go function that calls the bindings.
	rt := registrytest.New(backend.TypeScript)
	program := `console.log(await tools.weather({city: "Lisbon"}))
try { await tools.weather({city: "Atlantis"}) } catch (e) { return e.message }`
	rt.Handle(program, func(ctx context.Context, env *registrytest.Env) (any, error) {
		lisbon, err := env.CallText("weather", `{"city":"Lisbon"}`)
		if err != nil {
			return nil, err
		}
		env.Log(lisbon)
		if _, err := env.Call("weather", json.RawMessage(`{"city":"Atlantis"}`)); err != nil {
			return err.Error(), nil
		}
		return nil, nil
	})

	events := json.NewEncoder(os.Stdout)
	reg := registry.New(
		registry.WithMode(registry.ModeCode),
		registry.WithRuntime(rt),
		registry.WithEventSink(func(ev registry.Event) { events.Encode(ev) }),
	)
	reg.Register(weather)

	res := reg.Execute(context.Background(), registry.Call{
		ID: "call-1", Name: "run_code", Arguments: json.RawMessage(`{"code":` + quote(program) + `}`),
	})
	fmt.Printf("isError=%v\n%s\n", res.IsError, res.Text())
	fmt.Println("value:", string(res.CodeRun.Value))
	// Output:
	// {"type":"tool/code-dispatch","parentCallId":"call-1","callId":"call-1:code:1","seq":1,"tool":"weather","arguments":{"city":"Lisbon"},"isError":false,"summary":"Lisbon: 21°C, clear"}
	// {"type":"tool/code-dispatch","parentCallId":"call-1","callId":"call-1:code:2","seq":2,"tool":"weather","arguments":{"city":"Atlantis"},"isError":true,"summary":"no station in Atlantis"}
	// isError=false
	// Lisbon: 21°C, clear
	// no station in Atlantis
	// value: "no station in Atlantis"
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
