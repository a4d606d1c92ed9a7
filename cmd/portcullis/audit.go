package main

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/portcullis-dev/portcullis/audit"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/server"
	"github.com/portcullis-dev/portcullis/trust"
)

func exportCmd() *cobra.Command {
	var o server.Options
	var out, subject, signKey string
	var since, until time.Time
	var sinceS, untilS string
	cmd := &cobra.Command{
		Use:   "export --out DIR",
		Short: "Export the record (every stream as JSON lines, with the gateway keys) for offline verification and analysis",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			for _, tv := range []struct {
				s string
				t *time.Time
			}{{sinceS, &since}, {untilS, &until}} {
				if tv.s != "" {
					t, err := time.Parse(time.RFC3339, tv.s)
					if err != nil {
						return fmt.Errorf("want an RFC 3339 time like 2026-11-29T10:00:00Z, got %q", tv.s)
					}
					*tv.t = t
				}
			}
			partial := subject != "" || sinceS != "" || untilS != ""
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			var w *audit.Writer
			n := 0
			bar := &progress{}
			var key ed25519.PrivateKey
			if signKey != "" {
				var err error
				if key, err = trust.LoadKey(signKey); err != nil {
					return fmt.Errorf("--sign-key: %w", err)
				}
			} else {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning: the manifest is unsigned (--sign-key KEY signs it with the root or an enrolled gateway key)")
			}
			err := server.ReadLedgerCounted(ctx, o, func(t audit.LedgerTrust) error {
				var err error
				w, err = audit.NewWriter(out, t, key)
				if partial && err == nil {
					w.SetFilter(fmt.Sprintf("subject %q since %q until %q", subject, sinceS, untilS))
				}
				return err
			}, func(total uint64) { bar = newProgress("exporting", "events", int64(total)) }, func(r audit.Record, at time.Time) error {
				bar.Add(1)
				if (subject != "" && !audit.SubjectMatches(subject, r.Subject)) ||
					(!since.IsZero() && at.Before(since)) || (!until.IsZero() && !at.Before(until)) {
					return nil
				}
				n++
				return w.Add(r, at)
			})
			bar.Finish()
			if err != nil {
				return err
			}
			if err := w.Close(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "exported %d events to %s\n", n, out)
			return nil
		},
	}
	readOptions(cmd, &o)
	cmd.Flags().StringVar(&out, "out", "", "export directory (created; must not hold an export)")
	cmd.Flags().StringVar(&subject, "subject", "", "only events on subjects matching this NATS filter (e.g. 'pc.exec.*.act_…'; 'pc.*.*.act_…' covers every execution shard); a partial export is not verifiable")
	cmd.Flags().StringVar(&sinceS, "since", "", "only events stored at or after this RFC 3339 time")
	cmd.Flags().StringVar(&untilS, "until", "", "only events stored before this RFC 3339 time")
	cmd.Flags().StringVar(&signKey, "sign-key", "", "sign the manifest with this Ed25519 key (root or enrolled gateway key; a path, file:PATH or env:NAME)")
	return cmd
}

func auditCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Verify the record"}
	var o server.Options
	var from string
	var asJSON bool
	var vo audit.VerifyOptions
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Check every hash, chain link and signature, and that no event is missing (live, or --from an export)",
		Long: `Checks, for every event of the record: its hash, its link to the previous event on its
subject, its writer's Ed25519 signature against the enrolled gateway keys, the state transition
it records, and that no stream sequence is missing; every checkpoint against the digest
recomputed from the events it covers; every stored enrollment record against the root's
signature (a forged or undecodable one is named where PORTCULLIS_META holds it, and never
trusted); for an export also each file against its manifest and each decoded event against
its stored bytes. A subject's chain goes on from its last valid event, as the gateways' fold
does: one forged message is one failure, and the genuine event after it is not accused.
--trusted-keys pins the keys (the root public key, or gateway keys) instead of believing the
record's own root record; --trusted-checkpoint (saved by "portcullis audit checkpoint")
detects a rollback or truncation before it. Prints a summary
and every failure with stream, sequence, subject and reason (quarantined messages included);
exits 1 on any failure, and when no ledger is found.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rep audit.Report
			if from != "" {
				var err error
				if rep, err = audit.ReadExport(from, vo); err != nil {
					return err
				}
			} else {
				ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
				defer stop()
				var v *audit.Verifier
				bar := &progress{}
				err := server.ReadLedgerCounted(ctx, o, func(t audit.LedgerTrust) error {
					var err error
					v, _, err = audit.NewAnchoredVerifier(t, vo)
					return err
				}, func(total uint64) { bar = newProgress("verifying", "events", int64(total)) }, func(r audit.Record, _ time.Time) error {
					v.Add(r)
					bar.Add(1)
					return nil
				})
				bar.Finish()
				if err != nil {
					return err
				}
				rep = v.Report()
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(w, "%d events on %d subjects in %d streams, written by %d gateways %v; %d checkpoints checked, %d trusted checkpoints\n",
					rep.Events, rep.Subjects, len(rep.Streams), len(rep.Writers), rep.Writers, rep.Checkpoints, rep.TrustedCheckpoints)
				if !rep.Anchored {
					fmt.Fprintln(w, "note: keys taken from the record's own root record; pin them with --trusted-keys")
				}
				for _, f := range rep.Failures {
					fmt.Fprintf(w, "FAIL %s seq %d %s: %s\n", f.Stream, f.Seq, f.Subject, f.Reason)
				}
				if rep.OK {
					fmt.Fprintln(w, "verified: every hash, chain link and signature holds")
				}
			}
			if !rep.OK {
				return audit.ErrFailed
			}
			return nil
		},
	}
	readOptions(verify, &o)
	verify.Flags().StringVar(&from, "from", "", "an export directory (portcullis export) instead of the live ledger")
	verify.Flags().BoolVar(&asJSON, "json", false, "machine-readable report")
	verify.Flags().StringVar(&vo.TrustedKeys, "trusted-keys", "", `file of trusted keys, one per line: "root HEX" (the ledger's root public key) or "GATEWAY_ID HEX"`)
	verify.Flags().StringVar(&vo.TrustedCheckpoint, "trusted-checkpoint", "", "checkpoints saved earlier by `portcullis audit checkpoint`: a rollback or truncation before them fails")
	cmd.AddCommand(verify, checkpointCmd(), quarantineCmd())
	return cmd
}

func checkpointCmd() *cobra.Command {
	var o server.Options
	var out string
	cmd := &cobra.Command{
		Use:   "checkpoint --out FILE",
		Short: "Save the latest signed checkpoint of every stream, to pin a later verify with --trusted-checkpoint",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			saved, err := server.SaveCheckpoint(cmd.Context(), o)
			if err != nil {
				return err
			}
			b, err := json.MarshalIndent(saved, "", "  ")
			if err != nil {
				return err
			}
			if err := os.WriteFile(out, b, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "saved %d checkpoints to %s\n", len(saved.Checkpoints), out)
			return nil
		},
	}
	readOptions(cmd, &o)
	cmd.Flags().StringVar(&out, "out", "", "file to write")
	return cmd
}

func quarantineCmd() *cobra.Command {
	var addr string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "quarantine",
		Short: "List the stored messages a gateway refused to fold or serve (forged, undecodable, broken chain, illegal transition)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := portcullisv1connect.NewAuditServiceClient(http.DefaultClient, addr)
			res, err := c.ListQuarantine(cmd.Context(), connect.NewRequest(&pb.ListQuarantineRequest{PageSize: 1000}))
			if err != nil {
				return err
			}
			if asJSON {
				b, err := protojson.Marshal(res.Msg)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d quarantined\n", res.Msg.GetTotal())
			for _, q := range res.Msg.GetQuarantined() {
				fmt.Fprintf(cmd.OutOrStdout(), "%s seq %d %s (claims %q): %s\n", q.GetStream(), q.GetSeq(), q.GetSubject(), q.GetGatewayId(), q.GetReason())
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "http://127.0.0.1:8080", "gateway API base URL")
	cmd.Flags().BoolVar(&asJSON, "json", false, "machine-readable")
	return cmd
}

func enrollCmd() *cobra.Command {
	var o server.Options
	var rootKey, id, pub, box, addr string
	cmd := &cobra.Command{
		Use:   "enroll --root-key FILE --gateway-id ID --public-key HEX --box-key HEX --addr URL",
		Short: "Enroll a gateway key with the ledger's root key (an unenrolled gateway refuses to start and prints these values)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rootKey == "" || id == "" || pub == "" || box == "" {
				return fmt.Errorf("--root-key, --gateway-id, --public-key and --box-key are required")
			}
			notes, err := server.Enroll(cmd.Context(), o, rootKey, id, pub, box, addr)
			for _, n := range notes {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: %s\n", n)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "enrolled gateway %s\n", id)
			return nil
		},
	}
	readOptions(cmd, &o)
	cmd.Flags().StringVar(&rootKey, "root-key", "", "the ledger's root private key (a path, file:PATH or env:NAME)")
	cmd.Flags().StringVar(&id, "gateway-id", "", "the gateway's id")
	cmd.Flags().StringVar(&pub, "public-key", "", "the gateway's Ed25519 public key (hex)")
	cmd.Flags().StringVar(&box, "box-key", "", "the gateway's X25519 box key (hex), to seal the fingerprint key to")
	cmd.Flags().StringVar(&addr, "addr", "", "the gateway's API base URL (http://host:port), where sessions may be forwarded")
	return cmd
}

func investigateCmd() *cobra.Command {
	var o server.Options
	var fp, opKey string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "investigate [EXECUTION_ID]",
		Short: "Answer, in the order an incident needs, what happened to an execution and its retries",
		Long: `Answers, with the evidence for each: (1) one agent process or two? (2) did the first call get
authorization and reach dispatch? (3) did the gateway get a response or exit status from the
target? (4) did result delivery fail after the target completed? (5) did the second call reuse
the execution id / Idempotency-Key, or create a new attempt? Then the timeline of every event of
every execution of the intent, across gateways. --fingerprint investigates the latest execution
of an intent.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			given := 0
			for _, v := range []string{id, fp, opKey} {
				if v != "" {
					given++
				}
			}
			if given != 1 {
				return fmt.Errorf("give one of EXECUTION_ID, --fingerprint, --operation-key")
			}
			id, events, err := server.ReadIntent(cmd.Context(), o, id, fp, opKey)
			if err != nil {
				return err
			}
			inv := audit.Investigate(id, events)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(inv)
			}
			fmt.Fprint(cmd.OutOrStdout(), inv.Text())
			return nil
		},
	}
	readOptions(cmd, &o)
	cmd.Flags().StringVar(&fp, "fingerprint", "", "investigate the latest execution with this fingerprint (hmac-sha256:…)")
	cmd.Flags().StringVar(&opKey, "operation-key", "", "investigate the latest execution accepted under this operation key")
	cmd.Flags().BoolVar(&asJSON, "json", false, "machine-readable answers and timeline")
	return cmd
}

func replayCmd() *cobra.Command {
	var o server.Options
	var from, out string
	cmd := &cobra.Command{
		Use:   "replay --views DIR",
		Short: "Fold an export (--from) or the live streams into fresh views, for analysts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--views is required")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			start := time.Now()
			bars := map[string]*progress{}
			n, err := server.Replay(ctx, o, from, out, func(stream string, applied, total uint64) {
				bar, ok := bars[stream]
				if !ok {
					bar = newProgress(stream, "events", int64(total))
					bars[stream] = bar
				}
				bar.Set(int64(applied))
			})
			for _, bar := range bars {
				bar.Finish()
			}
			if err != nil {
				return err
			}
			secs := time.Since(start).Seconds()
			fmt.Fprintf(cmd.ErrOrStderr(), "\nreplayed %d events into %s in %.2fs (%.0f events/s)\n", n, out, secs, float64(n)/secs)
			return nil
		},
	}
	readOptions(cmd, &o)
	cmd.Flags().StringVar(&from, "from", "", "an export directory (portcullis export) instead of the live ledger")
	cmd.Flags().StringVar(&out, "views", "", "directory for the fresh views (must not exist)")
	return cmd
}
