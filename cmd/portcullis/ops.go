package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/portcullis-dev/portcullis/audit"
	"github.com/portcullis-dev/portcullis/config"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	"github.com/portcullis-dev/portcullis/server"
	"github.com/portcullis-dev/portcullis/telemetry"
)

// Where the API is: every command that talks to a running gateway takes
// --addr (default $PORTCULLIS_ADDR, else http://127.0.0.1:8080; HOST:PORT
// or a URL) and the credentials of apiFlags (--token, default
// $PORTCULLIS_TOKEN), the same way.
const defaultAddr = "http://127.0.0.1:8080"

// listPageMax is the page size the CLI asks for when it lists.
const listPageMax = 1000

// addrFlag adds --addr to fs.
func addrFlag(fs *pflag.FlagSet, addr *string) {
	def := os.Getenv("PORTCULLIS_ADDR")
	if def == "" {
		def = defaultAddr
	}
	fs.StringVar(addr, "addr", def, "API of a running gateway, HOST:PORT or URL (default $PORTCULLIS_ADDR, else "+defaultAddr+")")
}

// apiBase is the API's base URL for --addr.
func apiBase(addr string) string {
	if strings.Contains(addr, "://") {
		return strings.TrimSuffix(addr, "/")
	}
	return "http://" + addr
}

// progress is a progress bar on stderr, drawn only when stderr is a
// terminal and the total is known; otherwise every call does nothing.
type progress struct{ bar *progressbar.ProgressBar }

func newProgress(desc, unit string, total int64) *progress {
	if total <= 0 || !term.IsTerminal(int(os.Stderr.Fd())) {
		return &progress{}
	}
	return &progress{bar: progressbar.NewOptions64(total, progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
		progressbar.OptionSetItsString(unit), progressbar.OptionThrottle(100*time.Millisecond))}
}

func (p *progress) Set(n int64) {
	if p.bar != nil {
		_ = p.bar.Set64(n)
	}
}

func (p *progress) Add(n int) {
	if p.bar != nil {
		_ = p.bar.Add(n)
	}
}

func (p *progress) Finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(os.Stderr)
	}
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use: "version", Short: "Print the version of this binary", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "portcullis %s (%s %s/%s)\n", telemetry.Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

func configCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Work with config files"}
	cmd.AddCommand(&cobra.Command{
		Use:   "validate FILE",
		Short: "Check a config file as serve would; print what it defines, or every problem (file:line: key: reason)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(args[0])
			if err != nil {
				return err
			}
			names := make([]string, 0, len(cfg.Tools))
			for n := range cfg.Tools {
				names = append(names, n)
			}
			sort.Strings(names)
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s: valid: %d tools, %d agents, %d upstreams\n", args[0], len(cfg.Tools), len(cfg.Agents), len(cfg.Upstreams))
			for _, n := range names {
				t := cfg.Tools[n]
				fmt.Fprintf(w, "  %-24s retry %-15s channel %s\n", n, t.Contract.Retry, orDash(t.Channel))
			}
			if len(cfg.Tools) == 0 {
				fmt.Fprintln(w, "warning: no tools: every tools/call and Begin would be refused")
			}
			return nil
		},
	})
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func eventsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "events", Short: "Read stored events"}
	var pretty bool
	decode := &cobra.Command{
		Use:   "decode",
		Short: "Print the stored event on stdin (a NATS message body) as JSON",
		Long: `Reads one message body of a Portcullis stream on stdin and prints the event as protobuf
JSON (the portcullis.v1.Event message). Made for the nats CLI:

  nats stream view PORTCULLIS_EXECUTIONS --translate 'portcullis events decode'

A body that is not a Portcullis event (the meta stream's plain values) is printed as it is.
An event whose hash does not match its content is printed and the command exits 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), ljs.MaxMsgBytes+1))
			if err != nil {
				return fmt.Errorf("read stdin: %w", err)
			}
			if len(data) > ljs.MaxMsgBytes {
				return fmt.Errorf("stdin holds more than one event's %d bytes", ljs.MaxMsgBytes)
			}
			w := cmd.OutOrStdout()
			ev := new(pb.Event)
			if proto.Unmarshal(data, ev) != nil || !strings.HasPrefix(ev.GetEventId(), "evt_") {
				_, err := w.Write(data)
				return err
			}
			opts := protojson.MarshalOptions{Multiline: pretty}
			js, err := opts.Marshal(ev)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s\n", js)
			if _, err := ljs.Decode(data); err != nil {
				return err
			}
			return nil
		},
	}
	decode.Flags().BoolVar(&pretty, "pretty", false, "indent the JSON")
	cmd.AddCommand(decode, timelineCmd())
	return cmd
}

// timelineCmd replays execution events across every execution shard in
// order of time.
func timelineCmd() *cobra.Command {
	var o server.Options
	q := server.TimelineQuery{Lane: -1}
	cmd := &cobra.Command{
		Use:   "timeline",
		Short: "Print execution events of every shard (or one, or one execution) merged in order of time, one JSON line each",
		Long: `Reads the execution streams (PORTCULLIS_EXECUTIONS and, on a sharded ledger,
PORTCULLIS_EXECUTIONS_<k>) up to their last sequence now and prints every event as one JSON line
{"stream","seq","subject","time","event"}: each shard in its own stream order, the shards merged
by the events' time. --execution ID keeps one execution's events, --shard K one shard's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := bufio.NewWriter(cmd.OutOrStdout())
			defer w.Flush()
			printed := 0
			err := server.ReadTimeline(cmd.Context(), o, q, func(r audit.Record, at time.Time, ev *pb.Event) error {
				printed++
				line := struct {
					Stream  string          `json:"stream"`
					Seq     uint64          `json:"seq"`
					Subject string          `json:"subject"`
					Time    time.Time       `json:"time"`
					Event   json.RawMessage `json:"event,omitempty"`
				}{Stream: r.Stream, Seq: r.Seq, Subject: r.Subject, Time: at.UTC()}
				if ev != nil {
					b, err := protojson.Marshal(ev)
					if err != nil {
						return err
					}
					line.Event = b
				}
				b, err := json.Marshal(line)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(w, "%s\n", b)
				return err
			})
			if err == nil && printed == 0 && q.ExecutionID != "" {
				return fmt.Errorf("execution %s: not found (no event of it in the execution streams)", q.ExecutionID)
			}
			return err
		},
	}
	readOptions(cmd, &o)
	cmd.Flags().StringVar(&q.ExecutionID, "execution", "", "only this execution's events (act_…)")
	cmd.Flags().IntVar(&q.Lane, "shard", -1, "only this shard (0: PORTCULLIS_EXECUTIONS, k: PORTCULLIS_EXECUTIONS_<k>); -1: every shard")
	return cmd
}

// parseState accepts a state as operators write it: outcome_unknown,
// OUTCOME_UNKNOWN or STATE_OUTCOME_UNKNOWN.
func parseState(s string) (pb.State, error) {
	name := "STATE_" + strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "STATE_")
	v, ok := pb.State_value[name]
	if !ok || v == int32(pb.State_STATE_UNSPECIFIED) {
		var all []string
		for i := range pb.State_name {
			if i != int32(pb.State_STATE_UNSPECIFIED) {
				all = append(all, telemetry.StateName(pb.State(i)))
			}
		}
		sort.Strings(all)
		return 0, fmt.Errorf("unknown state %q: want one of %s", s, strings.Join(all, ", "))
	}
	return pb.State(v), nil
}

func executionsCmd() *cobra.Command {
	var addr string
	cmd := &cobra.Command{Use: "executions", Short: "List and resolve executions (through a running gateway's API)"}
	addrFlag(cmd.PersistentFlags(), &addr)
	httpClient := apiFlags(cmd, true)
	svc := func() (portcullisv1connect.ExecutionServiceClient, error) {
		hc, err := httpClient()
		if err != nil {
			return nil, err
		}
		return portcullisv1connect.NewExecutionServiceClient(hc, apiBase(addr)), nil
	}

	var stateS, tool string
	var limit int
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List executions, newest first (--state outcome_unknown for the uncertain ones)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var state pb.State
			if stateS != "" {
				var err error
				if state, err = parseState(stateS); err != nil {
					return err
				}
			}
			if limit <= 0 {
				return errors.New("--limit must be positive")
			}
			c, err := svc()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			token, n := "", 0
			for n < limit {
				res, err := c.ListExecutions(cmd.Context(), connect.NewRequest(&pb.ListExecutionsRequest{
					PageSize: int32(min(limit-n, listPageMax)), PageToken: token, State: state, Tool: tool}))
				if err != nil {
					return err
				}
				for _, x := range res.Msg.GetExecutions() {
					n++
					if asJSON {
						js, err := protojson.Marshal(x)
						if err != nil {
							return err
						}
						fmt.Fprintf(w, "%s\n", js)
						continue
					}
					fmt.Fprintf(w, "%s  %-30s  %-20s  actor %s  accepted %s  attached %d\n", x.GetExecutionId(), telemetry.StateName(x.GetState()),
						x.GetTool(), x.GetActor(), x.GetAcceptedAt().AsTime().Format(time.RFC3339), x.GetAttachCount())
				}
				if token = res.Msg.GetNextPageToken(); token == "" {
					break
				}
			}
			if n == 0 && !asJSON {
				fmt.Fprintln(w, "no executions match")
			}
			return nil
		},
	}
	list.Flags().StringVar(&stateS, "state", "", "only this state (e.g. outcome_unknown, dispatched, awaiting_approval)")
	list.Flags().StringVar(&tool, "tool", "", "only this tool")
	list.Flags().IntVar(&limit, "limit", 100, "at most this many")
	list.Flags().BoolVar(&asJSON, "json", false, "one JSON execution per line")

	var completed, notExecuted bool
	var evidence, by, body, contentType string
	var status int32
	resolve := &cobra.Command{
		Use:   "resolve EXECUTION_ID (--completed --target-status N [--result-body B] | --not-executed) --evidence TEXT",
		Short: "Resolve an OUTCOME_UNKNOWN execution on evidence: the target performed it, or absence is proven",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if completed == notExecuted {
				return errors.New("say what the evidence shows: exactly one of --completed or --not-executed")
			}
			if strings.TrimSpace(evidence) == "" {
				return errors.New("--evidence is required: what shows the outcome (status endpoint answer, marker, a person's check)")
			}
			req := &pb.ResolveRequest{ExecutionId: args[0], By: by, Evidence: evidence, Resolution: pb.Resolution_RESOLUTION_NOT_EXECUTED}
			if completed {
				if status == 0 {
					return errors.New("--completed needs --target-status (the status the target answered)")
				}
				req.Resolution, req.TargetStatus, req.ResultBody, req.ResultContentType = pb.Resolution_RESOLUTION_COMPLETED, status, body, contentType
			}
			c, err := svc()
			if err != nil {
				return err
			}
			res, err := c.Resolve(cmd.Context(), connect.NewRequest(req))
			if err != nil {
				return err
			}
			x := res.Msg.GetExecution()
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", x.GetExecutionId(), telemetry.StateName(x.GetState()))
			return nil
		},
	}
	f := resolve.Flags()
	f.BoolVar(&completed, "completed", false, "the target performed the action")
	f.BoolVar(&notExecuted, "not-executed", false, "absence is proven: the target did not perform it")
	f.StringVar(&evidence, "evidence", "", "what shows it (required)")
	f.StringVar(&by, "by", "", "who resolves it; the gateway records the authenticated caller and refuses any other name")
	f.Int32Var(&status, "target-status", 0, "with --completed: the target's status")
	f.StringVar(&body, "result-body", "", "with --completed: the target's answer")
	f.StringVar(&contentType, "result-content-type", "application/json", "with --completed: its content type")
	cmd.AddCommand(list, resolve)
	return cmd
}
