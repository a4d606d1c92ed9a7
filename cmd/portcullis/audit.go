package main

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/portcullis-dev/portcullis/audit"
	"github.com/portcullis-dev/portcullis/server"
)

func exportCmd() *cobra.Command {
	var o server.Options
	var out, subject string
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
			err := server.ReadLedgerCounted(ctx, o, func(keys map[string]ed25519.PublicKey) error {
				var err error
				w, err = audit.NewWriter(out, keys)
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
	cmd.Flags().StringVar(&subject, "subject", "", "only events on subjects matching this NATS filter (e.g. 'pc.exec.*.act_…'); a partial export is not verifiable")
	cmd.Flags().StringVar(&sinceS, "since", "", "only events stored at or after this RFC 3339 time")
	cmd.Flags().StringVar(&untilS, "until", "", "only events stored before this RFC 3339 time")
	return cmd
}

func auditCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Verify the record"}
	var o server.Options
	var from string
	var asJSON bool
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Check every hash, chain link and signature, and that no event is missing (live, or --from an export)",
		Long: `Checks, for every event of the record: its hash, its link to the previous event on its
subject, its writer's Ed25519 signature against the gateway keys recorded in the ledger, and
that no stream sequence is missing; for an export also each file against its manifest. Prints
a summary and every failure with stream, sequence, subject and reason; exits 1 on any failure.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rep audit.Report
			if from != "" {
				var err error
				if rep, err = audit.ReadExport(from); err != nil {
					return err
				}
			} else {
				ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
				defer stop()
				var v *audit.Verifier
				bar := &progress{}
				err := server.ReadLedgerCounted(ctx, o, func(keys map[string]ed25519.PublicKey) error {
					v = audit.NewVerifier(keys)
					return nil
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
				fmt.Fprintf(w, "%d events on %d subjects in %d streams, written by %d gateways %v\n", rep.Events, rep.Subjects, len(rep.Streams), len(rep.Writers), rep.Writers)
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
	cmd.AddCommand(verify)
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
