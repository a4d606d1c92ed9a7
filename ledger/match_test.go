package ledger

import (
	"strings"
	"testing"
	"time"

	"github.com/portcullis-dev/portcullis/contract"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

type matchCase struct {
	name  string
	in    MatchInput
	want  MatchKind
	wantR pb.Recovery // for MatchAttach
}

func TestMatchPrior(t *testing.T) {
	now := time.Date(2026, 7, 22, 14, 3, 18, 0, time.UTC)
	tenMinutes := contract.MatchWindow{Duration: 10 * time.Minute}
	untilResolved := contract.MatchWindow{UntilResolved: true}
	con := func(class contract.RetryClass, w contract.MatchWindow) contract.Contract {
		return contract.Contract{Tool: "deploy_release", Retry: class, MatchWindow: w, Approval: contract.ApprovalSession}
	}
	// A prior dispatched 1s ago with a deadline 1m ahead, unless told.
	prior := func(s pb.State, ago time.Duration) *pb.Execution {
		x := &pb.Execution{
			ExecutionId:   "exe_prior",
			State:         s,
			RequestDigest: "digest-a",
			OperationKey:  "op-1",
			AcceptedAt:    timestamppb.New(now.Add(-ago)),
		}
		if s == sDisp {
			x.DispatchedAt = timestamppb.New(now.Add(-time.Second))
			x.DispatchDeadline = timestamppb.New(now.Add(time.Minute))
		}
		return x
	}
	overdue := func(x *pb.Execution, deadline time.Time) *pb.Execution {
		x.DispatchDeadline = timestamppb.New(deadline)
		return x
	}
	legacy := func(x *pb.Execution, dispatched time.Time) *pb.Execution {
		x.DispatchDeadline = nil
		x.DispatchedAt = timestamppb.New(dispatched)
		return x
	}
	withRetention := func(c contract.Contract, d time.Duration) contract.Contract {
		c.KeyRetention = contract.KeyRetention{Duration: d}
		return c
	}
	sq := con(contract.StatusQuery, tenMinutes)

	tests := []matchCase{
		{
			name: "no prior",
			in:   MatchInput{Contract: con(contract.StatusQuery, tenMinutes), RequestDigest: "digest-a"},
			want: MatchNew,
		},
		{
			name: "read_only never matches an attachable prior",
			in:   MatchInput{Contract: con(contract.ReadOnly, tenMinutes), RequestDigest: "digest-a", Prior: prior(sDisp, time.Minute)},
			want: MatchNew,
		},
		{
			name: "read_only never refuses a reused operation key",
			in:   MatchInput{Contract: con(contract.ReadOnly, tenMinutes), ByOperationKey: true, RequestDigest: "digest-b", Prior: prior(sDisp, time.Minute)},
			want: MatchNew,
		},
		{
			name: "prior outside the window",
			in:   MatchInput{Contract: con(contract.StatusQuery, tenMinutes), RequestDigest: "digest-a", Prior: prior(sUnknown, 11*time.Minute)},
			want: MatchNew,
		},
		{
			name: "zero window matches nothing",
			in:   MatchInput{Contract: con(contract.StatusQuery, contract.MatchWindow{}), RequestDigest: "digest-a", Prior: prior(sDisp, time.Second)},
			want: MatchNew,
		},
		{
			name: "final DELIVERED prior inside the window",
			in:   MatchInput{Contract: con(contract.StatusQuery, tenMinutes), RequestDigest: "digest-a", Prior: prior(sDelivered, time.Minute)},
			want: MatchNew,
		},
		{
			name: "final NOT_EXECUTED prior inside the window",
			in:   MatchInput{Contract: con(contract.StatusQuery, tenMinutes), RequestDigest: "digest-a", Prior: prior(sNotExec, time.Minute)},
			want: MatchNew,
		},
		{
			name: "final prior with until_resolved",
			in:   MatchInput{Contract: con(contract.Irreversible, untilResolved), RequestDigest: "digest-a", Prior: prior(sDelivered, 1000*time.Hour)},
			want: MatchNew,
		},
		{
			name:  "until_resolved attaches to an old unknown outcome",
			in:    MatchInput{Contract: con(contract.Irreversible, untilResolved), RequestDigest: "digest-a", Prior: prior(sUnknown, 1000*time.Hour)},
			want:  MatchAttach,
			wantR: pb.Recovery_RECOVERY_NEEDS_REVIEW,
		},
		{
			name:  "operation key, same digest, in flight",
			in:    MatchInput{Contract: con(contract.StatusQuery, tenMinutes), ByOperationKey: true, RequestDigest: "digest-a", Prior: prior(sDisp, 9*time.Minute)},
			want:  MatchAttach,
			wantR: pb.Recovery_RECOVERY_WAIT,
		},
		{
			name: "operation key, different digest, inside the window",
			in:   MatchInput{Contract: con(contract.StatusQuery, tenMinutes), ByOperationKey: true, RequestDigest: "digest-b", Prior: prior(sDisp, time.Minute)},
			want: MatchRefuse,
		},
		{
			name: "operation key, different digest, prior DELIVERED",
			in:   MatchInput{Contract: con(contract.StatusQuery, tenMinutes), ByOperationKey: true, RequestDigest: "digest-b", Prior: prior(sDelivered, time.Minute)},
			want: MatchRefuse,
		},
		{
			name: "operation key, different digest, outside the match window but kept by the ledger",
			in:   MatchInput{Contract: sq, ByOperationKey: true, RequestDigest: "digest-b", Prior: prior(sDelivered, 1000*time.Hour)},
			want: MatchRefuse,
		},
		{
			name: "operation key, different digest, outside the key retention",
			in:   MatchInput{Contract: withRetention(sq, 48*time.Hour), ByOperationKey: true, RequestDigest: "digest-b", Prior: prior(sDisp, 49*time.Hour)},
			want: MatchNew,
		},
		{
			name:  "operation key after DELIVERED returns the stored result",
			in:    MatchInput{Contract: sq, ByOperationKey: true, RequestDigest: "digest-a", Prior: prior(sDelivered, time.Minute)},
			want:  MatchAttach,
			wantR: pb.Recovery_RECOVERY_RETURN_RESULT,
		},
		{
			name:  "operation key after DELIVERED, long past the match window",
			in:    MatchInput{Contract: sq, ByOperationKey: true, RequestDigest: "digest-a", Prior: prior(sDelivered, 1000*time.Hour)},
			want:  MatchAttach,
			wantR: pb.Recovery_RECOVERY_RETURN_RESULT,
		},
		{
			name:  "operation key inside a 48h key retention, past the match window",
			in:    MatchInput{Contract: withRetention(sq, 48*time.Hour), ByOperationKey: true, RequestDigest: "digest-a", Prior: prior(sDelivered, 47*time.Hour)},
			want:  MatchAttach,
			wantR: pb.Recovery_RECOVERY_RETURN_RESULT,
		},
		{
			name: "operation key past its 48h key retention",
			in:   MatchInput{Contract: withRetention(sq, 48*time.Hour), ByOperationKey: true, RequestDigest: "digest-a", Prior: prior(sDelivered, 49*time.Hour)},
			want: MatchNew,
		},
		{
			name:  "operation key after DENIED returns the denial",
			in:    MatchInput{Contract: sq, ByOperationKey: true, RequestDigest: "digest-a", Prior: prior(sDenied, 2*time.Hour)},
			want:  MatchAttach,
			wantR: pb.Recovery_RECOVERY_RETURN_DENIAL,
		},
		{
			name:  "operation key after NOT_EXECUTED resumes the same execution",
			in:    MatchInput{Contract: sq, ByOperationKey: true, RequestDigest: "digest-a", Prior: prior(sNotExec, 2*time.Hour)},
			want:  MatchAttach,
			wantR: pb.Recovery_RECOVERY_RESUME,
		},
		{
			name: "operation key, DISPATCHED past its deadline: expire first",
			in:   MatchInput{Contract: sq, ByOperationKey: true, RequestDigest: "digest-a", Prior: overdue(prior(sDisp, time.Minute), now.Add(-time.Millisecond))},
			want: MatchExpire,
		},
		{
			name: "fingerprint, DISPATCHED exactly at its deadline: expire first",
			in:   MatchInput{Contract: sq, RequestDigest: "digest-a", Prior: overdue(prior(sDisp, time.Minute), now)},
			want: MatchExpire,
		},
		{
			name:  "DISPATCHED without a recorded deadline: dispatched_at + timeout + grace, still ahead",
			in:    MatchInput{Contract: sq, RequestDigest: "digest-a", Prior: legacy(prior(sDisp, time.Minute), now.Add(-contract.DefaultTimeout))},
			want:  MatchAttach,
			wantR: pb.Recovery_RECOVERY_WAIT,
		},
		{
			name: "DISPATCHED without a recorded deadline: dispatched_at + timeout + grace, passed",
			in:   MatchInput{Contract: sq, RequestDigest: "digest-a", Prior: legacy(prior(sDisp, time.Minute), now.Add(-contract.DefaultTimeout-DispatchGrace))},
			want: MatchExpire,
		},
		{
			name:  "fingerprint match ignores the request digest",
			in:    MatchInput{Contract: con(contract.StatusQuery, tenMinutes), ByOperationKey: false, RequestDigest: "digest-b", Prior: prior(sCompleted, time.Minute)},
			want:  MatchAttach,
			wantR: pb.Recovery_RECOVERY_RETURN_RESULT,
		},
	}

	// Inside the window, every attachable state attaches with the recovery
	// RecoveryFor gives, for every class that is matched at all.
	for _, s := range allStates {
		if !Attachable(s) {
			continue
		}
		for _, class := range []contract.RetryClass{contract.IdempotencyKey, contract.StatusQuery, contract.Irreversible} {
			rec, _ := RecoveryFor(s, class)
			tests = append(tests, matchCase{
				name:  "attach " + s.String() + " " + string(class),
				in:    MatchInput{Contract: con(class, tenMinutes), RequestDigest: "digest-a", Prior: prior(s, time.Minute)},
				want:  MatchAttach,
				wantR: rec,
			})
		}
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = now
			got := MatchPrior(tc.in)
			if got.Kind != tc.want {
				t.Fatalf("kind = %d, want %d (%+v)", got.Kind, tc.want, got)
			}
			switch tc.want {
			case MatchAttach:
				wantRec, wantWhy := RecoveryFor(tc.in.Prior.GetState(), tc.in.Contract.Retry)
				if got.Recovery != tc.wantR || got.Recovery != wantRec {
					t.Errorf("recovery = %s, want %s", got.Recovery, tc.wantR)
				}
				if tc.in.Prior.GetState() == sDisp {
					// WAIT says until when the first call is in flight.
					d := DispatchDeadline(tc.in.Prior, tc.in.Contract).UTC().Format(time.RFC3339Nano)
					if !strings.Contains(got.Reason, "in flight until "+d) {
						t.Errorf("reason = %q, want it to name the deadline %s", got.Reason, d)
					}
				} else if got.Reason != wantWhy || got.Reason == "" {
					t.Errorf("reason = %q, want RecoveryFor's %q", got.Reason, wantWhy)
				}
			case MatchExpire:
				if !strings.Contains(got.Reason, "deadline") {
					t.Errorf("expiry reason %q does not name the deadline", got.Reason)
				}
			case MatchRefuse:
				if got.Reason == "" {
					t.Error("refusal without a reason")
				}
			case MatchNew:
				if got.Recovery != pb.Recovery_RECOVERY_UNSPECIFIED {
					t.Errorf("new execution with recovery %s", got.Recovery)
				}
			}
		})
	}
}
