// Command target is the demo's deploy and payment API: a small HTTP server
// on 127.0.0.1 that honours Idempotency-Key (a repeated key performs nothing
// and gets the first answer), answers the status of every key at
// /status/{key}, and prints every request, so you can watch a retry through
// Portcullis perform nothing twice. It is for the README's quickstart, not
// for production.
//
//	go run ./examples/target --listen 127.0.0.1:9090
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"
	"time"
)

// maxBodyBytes bounds one request body.
const maxBodyBytes = 1 << 20

type api struct {
	mu        sync.Mutex
	answers   map[string][]byte // Idempotency-Key → first answer
	performed int
}

func main() {
	listen := flag.String("listen", "127.0.0.1:9090", "HOST:PORT to serve on")
	flag.Parse()
	a := &api{answers: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status/{key}", a.status)
	mux.HandleFunc("GET /releases", a.release)
	mux.HandleFunc("POST /", a.perform)
	log.Printf("demo target on http://%s (POST performs once per Idempotency-Key; GET /status/{key})", *listen)
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

func (a *api) perform(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		http.Error(w, `{"error":"Idempotency-Key is required"}`, http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	ans, repeat := a.answers[key]
	if !repeat {
		a.performed++
		ans, _ = json.Marshal(map[string]any{
			"performed": a.performed, "path": r.URL.Path, "idempotency_key": key,
			"request": json.RawMessage(orEmpty(body)), "at": time.Now().UTC().Format(time.RFC3339),
		})
		a.answers[key] = ans
	}
	n := a.performed
	a.mu.Unlock()
	if repeat {
		log.Printf("POST %s key=%s: a repeat, performed nothing (performed so far: %d)", r.URL.Path, key, n)
	} else {
		log.Printf("POST %s key=%s: PERFORMED (performed so far: %d) %s", r.URL.Path, key, n, strings.TrimSpace(string(body)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(ans)
}

func (a *api) status(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	ans, ok := a.answers[r.PathValue("key")]
	a.mu.Unlock()
	if !ok {
		http.Error(w, `{"error":"no such operation"}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(ans)
}

func (a *api) release(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"release_id":%q,"state":"rolled_out"}`+"\n", r.URL.Query().Get("release_id"))
}

func orEmpty(b []byte) []byte {
	if !json.Valid(b) {
		return []byte("null")
	}
	return b
}
