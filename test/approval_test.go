package test

import (
	"fmt"
	"sync"
	"testing"

	svc "github.com/portcullis-dev/portcullis/gen/portcullis/v1/portcullisv1connect"
)

// A person's decision is taken once (DESIGN §4: decisions are
// compare-and-set, never "check then write"). alice approves and bob
// denies the same pending per_use execution at the same moment, through
// the ApprovalService and through ExecutionService.Deny: exactly one of
// the two is told it decided, and the execution shows that one's state
// and name. After an approval, a denial is refused and the approver stays
// on the record.
func TestApprovalDecisionsRaceOnce(t *testing.T) {
	cfg, tokens := authConfig(t)
	addr, _, _ := serveWithCallers(t, cfg, tokens["analyst-1"])
	as := func(name string) string { return "Bearer " + tokens[name] }
	begin := func(n int) string {
		t.Helper()
		code, out := rpc(t, addr, svc.ExecutionServiceBeginProcedure, as("deploy-runner"), fmt.Sprintf(`{"action": {"actor": "agent-7",
			"tool": "rotate_credentials", "target": "vault", "method": "POST", "arguments": {"credential": "db-%d"}, "intentScope": "run:race"}}`, n))
		if code != "ok" {
			t.Fatalf("Begin: %s %v", code, out)
		}
		return out["execution"].(map[string]any)["executionId"].(string)
	}
	execution := func(id string) map[string]any {
		t.Helper()
		code, out := rpc(t, addr, svc.ExecutionServiceGetExecutionProcedure, as("analyst-1"), fmt.Sprintf(`{"executionId": %q}`, id))
		if code != "ok" {
			t.Fatalf("GetExecution: %s %v", code, out)
		}
		return out["execution"].(map[string]any)
	}
	for round, deny := range []string{svc.ApprovalServiceDenyProcedure, svc.ExecutionServiceDenyProcedure} {
		wins := map[string]int{}
		for n := range 40 {
			id := begin(100*round + n) // a new intent each time: a retry would attach to the decided one
			body := fmt.Sprintf(`{"executionId": %q, "reason": "race"}`, id)
			var approve, denied string
			var start, done sync.WaitGroup
			start.Add(1)
			done.Add(2)
			go func() {
				defer done.Done()
				start.Wait()
				approve, _ = rpc(t, addr, svc.ApprovalServiceApproveProcedure, as("alice"), fmt.Sprintf(`{"executionId": %q}`, id))
			}()
			go func() {
				defer done.Done()
				start.Wait()
				denied, _ = rpc(t, addr, deny, as("bob"), body)
			}()
			start.Done()
			done.Wait()
			x := execution(id)
			switch {
			case approve == "ok" && denied == "ok":
				t.Fatalf("%s: both the approval and the denial (%s) were told they decided; the execution ended %v by %v", id, deny, x["state"], x["authorizedBy"])
			case approve == "ok":
				wins["approve"]++
				if x["state"] != "STATE_AUTHORIZED" || x["authorizedBy"] != "alice" || denied != "failed_precondition" {
					t.Fatalf("%s: approval won, denial %s; execution %v by %v", id, denied, x["state"], x["authorizedBy"])
				}
			case denied == "ok":
				wins["deny"]++
				if x["state"] != "STATE_DENIED" || x["authorizedBy"] != "bob" || approve != "failed_precondition" {
					t.Fatalf("%s: denial won, approval %s; execution %v by %v", id, approve, x["state"], x["authorizedBy"])
				}
			default:
				t.Fatalf("%s: neither decided (approve %s, deny %s)", id, approve, denied)
			}
		}
		t.Logf("%s against Approve: %v", deny, wins)
	}

	// Decided is decided: a later denial through either service is refused
	// and changes nothing.
	id := begin(1000)
	if code, out := rpc(t, addr, svc.ApprovalServiceApproveProcedure, as("alice"), fmt.Sprintf(`{"executionId": %q}`, id)); code != "ok" {
		t.Fatalf("Approve: %s %v", code, out)
	}
	for _, deny := range []string{svc.ApprovalServiceDenyProcedure, svc.ExecutionServiceDenyProcedure} {
		if code, out := rpc(t, addr, deny, as("bob"), fmt.Sprintf(`{"executionId": %q, "reason": "late"}`, id)); code != "failed_precondition" {
			t.Fatalf("%s after the approval: %s %v, want failed_precondition", deny, code, out)
		}
	}
	if x := execution(id); x["state"] != "STATE_AUTHORIZED" || x["authorizedBy"] != "alice" {
		t.Fatalf("after the refused denials: %v by %v", x["state"], x["authorizedBy"])
	}
}
