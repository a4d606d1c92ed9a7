package server

import (
	"context"
	"net/http"

	"github.com/portcullis-dev/portcullis/audit"
	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/console"
	"github.com/portcullis-dev/portcullis/gateway"
)

// newConsole wires the operator console on the gateway's own services, in
// process. It reads the shared ledger and views, so any gateway serves it,
// and signs callers in through the gateway's Authenticator (the config's
// callers:, or the local operator when there are none).
func (g *Gateway) newConsole(cfg *config.Config, o Options, ex *gateway.ExecutionService, ap *gateway.ApprovalService, bu *gateway.BudgetService) (http.Handler, error) {
	c, err := console.New(console.Deps{
		GatewayID: g.ID, Auth: g.Auth, Executions: ex, Approvals: ap, Budget: bu,
		Accounts: g.Views.AccountNames,
		Investigate: func(ctx context.Context, executionID, fingerprint, operationKey string) (audit.Investigation, error) {
			s := g.laneStreams()
			if operationKey != "" {
				var err error
				if executionID, err = executionByOperationKey(ctx, s, g.Keyring, operationKey); err != nil {
					return audit.Investigation{}, err
				}
			}
			id, events, err := readIntent(ctx, s, g.sesLog.Stream(), g.Keyring, executionID, fingerprint)
			if err != nil {
				return audit.Investigation{}, err
			}
			return audit.Investigate(id, events), nil
		},
		Contracts: cfg.Contracts(),
		Logger:    g.log,
		Now:       o.Now,
	})
	if err != nil {
		return nil, err
	}
	return c.Handler(), nil
}
