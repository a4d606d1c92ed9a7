package config_test

import (
	"fmt"

	"github.com/portcullis-dev/portcullis/config"
)

func ExampleParse() {
	_, err := config.Parse("examples/bad.yaml", []byte(`tools:
  deploy_release:
    retry: sometimes
    match_window: 1h
`))
	fmt.Println(err)

	cfg, _ := config.Parse("good.yaml", []byte(`tools:
  deploy_release:
    retry: status_query
    match_window: 1h
`))
	c, _ := cfg.Contracts().Lookup("deploy_release")
	fmt.Println(c.Retry, c.MatchWindow, c.Approval)
	// Output:
	// examples/bad.yaml:3: tools.deploy_release.retry: unknown retry class "sometimes" (want read_only, idempotency_key, status_query, irreversible)
	// status_query 1h0m0s session
}
