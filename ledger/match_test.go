package ledger

import (
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
	prior := func(s pb.State, ago time.Duration) *pb.Execution {
		return &pb.Execution{
			ExecutionId:   "exe_prior",
			State:         s,
			RequestDigest: "digest-a",
			OperationKey:  "op-1",
			AcceptedAt:    timestamppb.New(now.Add(-ago)),
		}
	}

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
			name: "operation key, different digest, outside the window",
			in:   MatchInput{Contract: con(contract.StatusQuery, tenMinutes), ByOperationKey: true, RequestDigest: "digest-b", Prior: prior(sDisp, 11*time.Minute)},
			want: MatchNew,
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
				if got.Reason != wantWhy || got.Reason == "" {
					t.Errorf("reason = %q, want RecoveryFor's %q", got.Reason, wantWhy)
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
