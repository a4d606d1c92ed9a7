// Command portcullis runs the Portcullis gateway and its operator tools.
// It parses flags, wires through package server, and exits; it holds no logic.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/portcullis-dev/portcullis/server"
	"github.com/portcullis-dev/portcullis/telemetry"
)

func main() {
	if err := root().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "portcullis:", err)
		if connect.CodeOf(err) == connect.CodeUnauthenticated {
			fmt.Fprintln(os.Stderr, "portcullis: give the token of a caller in the gateway's callers: with --token TOKEN or $PORTCULLIS_TOKEN")
		}
		os.Exit(1)
	}
}

func root() *cobra.Command {
	cmd := &cobra.Command{
		Use:           "portcullis",
		Short:         "Execution identity and budgets for AI-agent tool calls, on an event-sourced ledger",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.AddCommand(serveCmd(), streamsCmd(), rebuildCmd(), budgetCmd(), approvalsCmd(), exportCmd(), auditCmd(), investigateCmd(), replayCmd(),
		executionsCmd(), eventsCmd(), configCmd(), versionCmd(), enrollCmd())
	return cmd
}

// ledgerFlags are the flags every command that opens the ledger takes.
func ledgerFlags(cmd *cobra.Command, o *server.Options) {
	f := cmd.Flags()
	f.StringVar(&o.DataDir, "data-dir", "", "data directory: embedded JetStream, views, fingerprint key (required)")
	f.StringVar(&o.NatsURL, "nats-url", "", "join an existing NATS/JetStream instead of the embedded server: comma-separated seed URLs (e.g. nats://10.0.0.5:4222,nats://10.0.0.6:4222)")
	natsFlags(cmd, o)
	f.StringVar(&o.NatsListen, "nats-listen", "", "client address of the embedded NATS server, for other gateways to join (default 127.0.0.1:4222, a free port if taken; :-1 for any free port)")
	f.IntVar(&o.Replicas, "replicas", 0, "stream replicas (0: 1 on a single server, 3 on a cluster)")
	f.IntVar(&o.ExecShards, "exec-shards", 0, fmt.Sprintf("execution streams a NEW ledger spreads executions over, fixed for its life (0: %d; an existing ledger keeps its recorded count and refuses a different one)", server.DefaultExecShards))
	f.StringVar(&o.FingerprintKey, "fingerprint-key", os.Getenv("PORTCULLIS_FINGERPRINT_KEY"), "fingerprint key as 64 hex chars (default $PORTCULLIS_FINGERPRINT_KEY, else DATA_DIR/fingerprint.key)")
	f.BoolVar(&o.NoShareKey, "no-share-fingerprint-key", false, "do not share the fingerprint key through the ledger (give it to every gateway yourself)")
	f.StringVar(&o.BatchStaging, "batch-staging", server.StagingMemory, "where the embedded NATS server stages the execution streams' atomic batches before committing them: memory (the embedded server keeps each batch in memory until its commit) or disk (nats-server stages it in a file store of its own); commits are fsynced either way (docs/streams.md)")
	f.BoolVar(&o.UnsafeNoFsync, "unsafe-no-fsync", false, "UNSAFE: do not fsync every JetStream write (acknowledged writes can be lost on power loss)")
	_ = cmd.MarkFlagRequired("data-dir")
}

// natsFlags are the credentials and TLS of a connection to an outside NATS.
func natsFlags(cmd *cobra.Command, o *server.Options) {
	f := cmd.Flags()
	f.StringVar(&o.NatsCreds, "nats-creds", "", "NATS credentials: an nkey seed file (as in DATA_DIR/nats/*.nk) or a user .creds file (default with --data-dir: the file of this command's role in DATA_DIR/nats)")
	f.StringVar(&o.NatsTLSCA, "nats-tls-ca", "", "CA certificate (PEM) that signed the NATS servers' certificates")
	f.StringVar(&o.NatsTLSCert, "nats-tls-cert", "", "client certificate (PEM) for NATS TLS")
	f.StringVar(&o.NatsTLSKey, "nats-tls-key", "", "client key (PEM) for NATS TLS")
}

// streamsCmd creates or updates the ledger's streams on an outside
// cluster, as the NATS admin user (gateways' users may not).
func streamsCmd() *cobra.Command {
	var o server.Options
	cmd := &cobra.Command{
		Use:   "streams",
		Short: "Create or update every stream of the ledger on --nats-url (needs the NATS admin user's credentials)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.NatsURL == "" {
				return fmt.Errorf("--nats-url is required (the embedded server sets its streams up itself)")
			}
			r, err := server.EnsureStreams(cmd.Context(), o)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "streams ready (%d replicas)\n", r)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.NatsURL, "nats-url", "", "comma-separated seed URLs of the cluster")
	f.StringVar(&o.DataDir, "data-dir", "", "data directory whose nats/admin.nk to use (instead of --nats-creds)")
	f.IntVar(&o.Replicas, "replicas", 0, "stream replicas (0: 1 on a single server, 3 on a cluster)")
	f.IntVar(&o.ExecShards, "exec-shards", 0, "execution streams of the ledger (its recorded count when it exists; else give the --exec-shards its first gateway will get)")
	natsFlags(cmd, &o)
	return cmd
}

func serveCmd() *cobra.Command {
	var o server.Options
	var logFormat, logLevel string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a gateway: Connect API on --listen, ledger on embedded JetStream or --nats-url",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			lg, err := telemetry.Logger(os.Stderr, logFormat, logLevel)
			if err != nil {
				return err
			}
			o.Logger = lg
			if o.MCPSessionIdle == 0 {
				o.MCPSessionIdle = -1 // the flag's 0: never closed
			}
			server.TuneGC(lg)
			return server.Run(ctx, o)
		},
	}
	ledgerFlags(cmd, &o)
	cmd.Flags().StringVar(&o.Listen, "listen", "127.0.0.1:8080", "HOST:PORT of the Connect API")
	cmd.Flags().StringVar(&o.ConfigPath, "config", "", "YAML config with tool contracts")
	cmd.Flags().DurationVar(&o.CheckpointEvery, "checkpoint-every", server.DefaultCheckpointEvery, "how often to seal signed checkpoints over the streams (also on shutdown)")
	cmd.Flags().StringVar(&o.GatewayID, "gateway-id", "", "id of this gateway in the ledger (default: config gateway.id, else one kept in the data dir)")
	cmd.Flags().StringVar(&logFormat, "log-format", telemetry.LogText, "log format: text or json")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	cmd.Flags().StringVar(&o.OTLPEndpoint, "otlp-endpoint", "", "export traces over OTLP/HTTP to this URL (e.g. http://127.0.0.1:4318); default $OTEL_EXPORTER_OTLP_ENDPOINT, else tracing is off")
	cmd.Flags().DurationVar(&o.MCPSessionIdle, "mcp-session-idle", server.DefaultMCPSessionIdle, "close a stateful (2025-11-25) MCP session after this long without a request; its client then opens a new one (0: never)")
	cmd.Flags().DurationVar(&o.StuckAfter, "projector-stuck-after", telemetry.DefaultStuckAfter, "report not ready when a projector stays behind this long without catching up")
	cmd.Flags().StringVar(&o.TLSCert, "tls-cert", "", "serve the API over TLS with this certificate (PEM)")
	cmd.Flags().StringVar(&o.TLSKey, "tls-key", "", "private key of --tls-cert (PEM)")
	cmd.Flags().StringVar(&o.ClientCA, "client-ca", "", "verify client certificates signed by this CA (PEM); callers.NAME.cert_sha256 maps one to a caller")
	cmd.Flags().StringVar(&o.RootKey, "root-key", "", "the ledger's root private key, to enroll this gateway itself (a path, file:PATH or env:NAME; default DATA_DIR/root.key when present, created with a new ledger)")
	cmd.Flags().StringVar(&o.RootPublicKey, "root-public-key", "", "pin the ledger's root public key (hex; default: pin the root seen first, in DATA_DIR/root.pub)")
	cmd.Flags().StringVar(&o.SigningKey, "signing-key", "", "this gateway's Ed25519 key (a path, file:PATH or env:NAME; default DATA_DIR/gateway.ed25519, created 0600)")
	cmd.Flags().BoolVar(&o.NoBudgetLead, "no-budget-lead", false, "decide every budget command on this gateway: never take an account's lease or forward to its leader (every gateway then races the others' compare-and-set on a hot account; correct, slower)")
	cmd.Flags().StringVar(&o.NatsMonitorURL, "nats-monitor-url", "", "with --nats-url: the servers' monitoring URLs (comma-separated, e.g. http://10.0.0.5:8222), to refuse a cluster that does not fsync every write and to check every minute that each replica of a ledger stream holds every message")
	return cmd
}

func rebuildCmd() *cobra.Command {
	var o server.Options
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "Rebuild the views from the streams (stop the gateway on this data dir first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			var bar *progress
			err := server.Rebuild(ctx, o, func(applied, total uint64) {
				if bar == nil {
					bar = newProgress("rebuilding views", "events", int64(total))
				}
				bar.Set(int64(applied))
			})
			if bar != nil {
				bar.Finish()
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(os.Stderr, "views rebuilt")
			return nil
		},
	}
	ledgerFlags(cmd, &o)
	return cmd
}
