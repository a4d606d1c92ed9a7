package telemetry

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// /metrics answers in OpenMetrics when the scraper asks for it, and in the
// Prometheus text format otherwise.
func TestMetricsFormats(t *testing.T) {
	h := NewMetrics().Handler(nil)
	for _, tc := range []struct{ accept, want string }{
		{"application/openmetrics-text; version=1.0.0", "application/openmetrics-text"},
		{"", "text/plain"},
	} {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, tc.want) {
			t.Errorf("Accept %q: Content-Type %q, want %s", tc.accept, ct, tc.want)
		}
		if !strings.Contains(rec.Body.String(), "portcullis_") {
			t.Errorf("Accept %q: no portcullis metric in the answer", tc.accept)
		}
	}
}

// The budget accounts' gauges go only to a request the check admits; every
// other metric goes to all.
func TestMetricsAccountsOnlyToAdmitted(t *testing.T) {
	m := NewMetrics()
	m.Watch(LedgerState{
		ExecutionStates: func() map[pb.State]int64 { return nil },
		Accounts: func(fn func(name, currency string, limit, spent, held int64)) error {
			fn("payroll", "EUR", 100, 20, 5)
			return nil
		},
	})
	h := m.Handler(func(r *http.Request) bool { return r.Header.Get("X-Finance") == "yes" })
	scrape := func(finance bool) string {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if finance {
			req.Header.Set("X-Finance", "yes")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	open, full := scrape(false), scrape(true)
	for _, name := range []string{"portcullis_budget_limit_minor", "portcullis_budget_spent_minor", "portcullis_budget_held_minor", "payroll"} {
		if strings.Contains(open, name) {
			t.Errorf("an unadmitted scrape shows %s", name)
		}
	}
	for _, want := range []string{`portcullis_budget_limit_minor{account="payroll",currency="EUR"} 100`, `portcullis_budget_spent_minor{account="payroll",currency="EUR"} 20`, `portcullis_budget_held_minor{account="payroll",currency="EUR"} 5`} {
		if !strings.Contains(full, want) {
			t.Errorf("an admitted scrape lacks %s", want)
		}
	}
	for _, body := range []string{open, full} {
		if !strings.Contains(body, `portcullis_executions{state="outcome_unknown"} 0`) {
			t.Errorf("a scrape lacks the executions by state:\n%s", body)
		}
	}
}
