package server

import (
	"context"
	"net/http"
	"time"

	"github.com/portcullis-dev/portcullis/audit"
	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/console"
	"github.com/portcullis-dev/portcullis/gateway"
)

// newConsole wires the operator console on the gateway's own services, in
// process. It reads the shared ledger and views, so any gateway serves it.
func (g *Gateway) newConsole(cfg *config.Config, o Options, ex *gateway.ExecutionService, ap *gateway.ApprovalService, bu *gateway.BudgetService) (http.Handler, error) {
	auth := o.ConsoleAuth
	if auth == nil {
		// TODO(lead): authenticate with auth/ (the config's callers) once it
		// lands; until then the console knows only --console-callers.
		auth = console.Callers{}
		g.log.Info("console: no callers configured; nobody can sign in (--console-callers)")
	}
	c, err := console.New(console.Deps{
		GatewayID: g.ID, Auth: auth, Executions: ex, Approvals: ap, Budget: bu,
		Accounts: g.Views.AccountNames,
		Investigate: func(ctx context.Context, executionID, fingerprint, operationKey string) (audit.Investigation, error) {
			s := g.jsLog.Stream()
			if operationKey != "" {
				var err error
				if executionID, err = executionByOperationKey(ctx, s, operationKey); err != nil {
					return audit.Investigation{}, err
				}
			}
			id, events, err := readIntent(ctx, s, executionID, fingerprint)
			if err != nil {
				return audit.Investigation{}, err
			}
			return audit.Investigate(id, events), nil
		},
		DispatchTimeout: func(tool string) time.Duration { return cfg.Tools[tool].Timeout },
		Logger:          g.log,
		Now:             o.Now,
	})
	if err != nil {
		return nil, err
	}
	return c.Handler(), nil
}
