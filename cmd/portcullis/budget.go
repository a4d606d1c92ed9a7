package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/portcullis-dev/portcullis/budget"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	"github.com/portcullis-dev/portcullis/server"
)

func budgetCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "budget", Short: "Finance's view of the budget: show, export, verify"}
	cmd.AddCommand(budgetShowCmd(), budgetExportCmd(), budgetVerifyCmd())
	return cmd
}

func budgetShowCmd() *cobra.Command {
	var addr string
	var httpClient func() (*http.Client, error)
	cmd := &cobra.Command{
		Use:   "show ACCOUNT",
		Short: "Show an account and its open holds (through a running gateway's API)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			hc, err := httpClient()
			if err != nil {
				return err
			}
			c := portcullisv1connect.NewBudgetServiceClient(hc, apiBase(addr))
			ctx := cmd.Context()
			acc, err := c.GetAccount(ctx, connect.NewRequest(&pb.GetAccountRequest{Account: args[0]}))
			if err != nil {
				return err
			}
			holds, err := c.ListHolds(ctx, connect.NewRequest(&pb.ListHoldsRequest{Account: args[0]}))
			if err != nil {
				return err
			}
			a := acc.Msg.GetAccount()
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "account   %s (%s)\nlimit     %d\nspent     %d\nheld      %d\navailable %d\nversion   %d\nlimit     %s (delegated by %s)\n",
				a.GetAccount(), a.GetCurrency(), a.GetLimit(), a.GetSpent(), a.GetHeld(), a.GetLimit()-a.GetSpent()-a.GetHeld(),
				a.GetVersion(), a.GetLimitDigest(), a.GetDelegator())
			fmt.Fprintf(w, "open holds (%d):\n", len(holds.Msg.GetHolds()))
			for _, h := range holds.Msg.GetHolds() {
				fmt.Fprintf(w, "  %-32s %12d  %s\n", h.GetOperationKey(), h.GetAmount(), h.GetRequestDigest())
			}
			return nil
		},
	}
	addrFlag(cmd.Flags(), &addr)
	httpClient = apiFlags(cmd, false)
	return cmd
}

// readOptions are the flags of commands that read the ledger directly.
func readOptions(cmd *cobra.Command, o *server.Options) {
	f := cmd.Flags()
	f.StringVar(&o.DataDir, "data-dir", "", "data directory of a stopped gateway (embedded default); with --nats-url, only its NATS credentials (DATA_DIR/nats) are used")
	f.StringVar(&o.NatsURL, "nats-url", "", "NATS of a running ledger (e.g. the address in DATA_DIR/nats.url), comma-separated seed URLs")
	natsFlags(cmd, o)
	f.StringVar(&o.NatsListen, "nats-listen", "127.0.0.1:-1", "client address of the embedded server while reading")
}

func budgetExportCmd() *cobra.Command {
	var o server.Options
	var account, format, out string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Export budget decisions (oldest first) as JSON lines or CSV",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "jsonl" && format != "csv" {
				return fmt.Errorf("--format must be jsonl or csv, not %q", format)
			}
			w := cmd.OutOrStdout()
			if out != "" && out != "-" {
				f, err := os.Create(out)
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			bw := bufio.NewWriter(w)
			defer bw.Flush()
			cw := csv.NewWriter(bw)
			if format == "csv" {
				_ = cw.Write([]string{"stream_seq", "at", "account", "outcome", "operation_key", "request_digest", "amount", "currency",
					"limit", "spent_seen", "held_seen", "account_version", "within_limit", "allowed", "override_by", "override_reason",
					"execution_id", "target_status", "remainder", "limit_digest", "evidence_note", "reason"})
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			err := server.ReadBudget(ctx, o, func(seq uint64, d *pb.BudgetDecision) error {
				if account != "" && d.GetAccount() != account {
					return nil
				}
				if format == "jsonl" {
					b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(d)
					if err != nil {
						return err
					}
					bw.Write(b)
					return bw.WriteByte('\n')
				}
				at := ""
				if d.GetAt() != nil {
					at = d.GetAt().AsTime().Format("2006-01-02T15:04:05.000Z07:00")
				}
				return cw.Write([]string{strconv.FormatUint(seq, 10), at, d.GetAccount(), d.GetOutcome(), d.GetOperationKey(),
					d.GetRequestDigest(), i64(d.GetAmount()), d.GetCurrency(), i64(d.GetLimit()), i64(d.GetSpentSeen()), i64(d.GetHeldSeen()),
					strconv.FormatUint(d.GetAccountVersion(), 10), strconv.FormatBool(d.GetWithinLimit()), strconv.FormatBool(d.GetAllowed()),
					d.GetOverride().GetBy(), d.GetOverride().GetReason(), d.GetEvidence().GetExecutionId(), status(d.GetEvidence()),
					i64(d.GetRemainder()), d.GetLimitDigest(), d.GetEvidence().GetNote(), d.GetReason()})
			})
			cw.Flush()
			if err != nil {
				return err
			}
			return cw.Error()
		},
	}
	readOptions(cmd, &o)
	cmd.Flags().StringVar(&account, "account", "", "only this account")
	cmd.Flags().StringVar(&format, "format", "jsonl", "jsonl or csv")
	cmd.Flags().StringVar(&out, "out", "-", "output file (- for stdout)")
	return cmd
}

func i64(v int64) string { return strconv.FormatInt(v, 10) }

// verifyReport is the machine-readable verifier report.
type verifyReport struct {
	Events   int              `json:"events"`
	Accounts int              `json:"accounts"`
	Clean    bool             `json:"clean"`
	Findings []budget.Finding `json:"findings"`
}

func budgetVerifyCmd() *cobra.Command {
	var o server.Options
	var from string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Replay the budget stream (live, or a JSON lines export) and report every inconsistency",
		Long: `Replays every budget decision and reports, per account: held amounts that do not sum to the
reserved total, a within-limit flag that does not match the arithmetic, over-limit decisions
(allowed or not), double-counted retries, and decisions that read a stale account version and
missed an open hold. Prints a JSON report. Exits 1 when any finding is a warning or an error;
over-limit denials are listed as information (the system did its job) and do not fail.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var events []budget.Event
			collect := func(_ uint64, d *pb.BudgetDecision) error {
				events = append(events, keeper.FromProto(d))
				return nil
			}
			if from != "" {
				if err := readExport(from, collect); err != nil {
					return err
				}
			} else {
				ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
				defer stop()
				if err := server.ReadBudget(ctx, o, collect); err != nil {
					return err
				}
			}
			fs := budget.Verify(events)
			accounts := map[string]bool{}
			for _, e := range events {
				accounts[e.Account] = true
			}
			rep := verifyReport{Events: len(events), Accounts: len(accounts), Clean: true, Findings: fs}
			if rep.Findings == nil {
				rep.Findings = []budget.Finding{}
			}
			for _, f := range fs {
				if f.Severity != budget.SeverityInfo {
					rep.Clean = false
				}
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			if err := enc.Encode(rep); err != nil {
				return err
			}
			if !rep.Clean {
				return errFindings
			}
			return nil
		},
	}
	readOptions(cmd, &o)
	cmd.Flags().StringVar(&from, "from", "", "a JSON lines export (portcullis budget export) instead of the live ledger")
	return cmd
}

var errFindings = fmt.Errorf("budget verify: findings (see report)")

func readExport(path string, deliver func(uint64, *pb.BudgetDecision) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if len(b) > 0 && !(len(b) == 1 && b[0] == '\n') {
			d := new(pb.BudgetDecision)
			if uerr := protojson.Unmarshal(b, d); uerr != nil {
				return fmt.Errorf("%s:%d: %w", path, line, uerr)
			}
			if derr := deliver(d.GetStreamSeq(), d); derr != nil {
				return derr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// status is an evidence's target status for the CSV: empty when none was
// observed, and the text of a record written before 2026-12-05.
func status(e *pb.Evidence) string {
	if e.GetTargetStatus() != 0 {
		return strconv.Itoa(int(e.GetTargetStatus()))
	}
	return e.GetLegacyTargetStatus()
}
