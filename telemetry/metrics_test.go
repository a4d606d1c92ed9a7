package telemetry

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// /metrics answers in OpenMetrics when the scraper asks for it, and in the
// Prometheus text format otherwise.
func TestMetricsFormats(t *testing.T) {
	h := NewMetrics().Handler()
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
