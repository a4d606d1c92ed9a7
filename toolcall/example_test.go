package toolcall_test

import (
	"fmt"

	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/toolcall"
)

// The tool definition fixes where the call goes; a caller that names
// another target is refused.
func ExampleBind() {
	tool := config.Tool{Name: "deploy", Channel: "http", Target: "https://deploy.example/releases", Method: "POST"}
	a, err := toolcall.Bind(tool, toolcall.Request{Actor: "agent-7", Tool: "deploy", Arguments: []byte(`{"release_id":"r1"}`)})
	fmt.Println(a.Channel, a.Method, a.Target, err)
	_, err = toolcall.Bind(tool, toolcall.Request{Actor: "agent-7", Tool: "deploy", Target: "https://other.example"})
	fmt.Println(err)
	// Output:
	// http POST https://deploy.example/releases <nil>
	// request does not fit the tool definition: action.target "https://other.example" differs from the definition of tool deploy (leave it out, or send the defined value)
}
