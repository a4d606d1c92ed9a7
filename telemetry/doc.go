// Package telemetry is how operators see a gateway: Prometheus metrics
// (decisions, append and commit-group latency, projector lag, executions by
// state, budgets, quarantined events, MCP calls by the OpenTelemetry MCP
// conventions), OpenTelemetry traces, structured logs and readiness.
//
// It is an adapter: domain packages (ledger, budget, fingerprint, contract)
// never import it nor Prometheus or OpenTelemetry. They offer small hooks
// (a decorated ledger.Log, the committer's OnCommit, the ledger's decision
// observer) and server wires them to a Metrics.
package telemetry
