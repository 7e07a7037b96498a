// The conformance plans served by Go's net/http (Ollama serves this way): each write of an SSE
// answer is flushed through http.Flusher (chunked, keep-alive); a JSON answer is one unflushed
// write, for which net/http sets Content-Length itself.
//
// go run go_server.go PLANS PORT
package main

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"time"
)

type plan struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Pause   float64           `json:"pause"`
	Writes  []string          `json:"writes"`
}

func main() {
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	var plans map[string]plan
	if err := json.Unmarshal(raw, &plans); err != nil {
		panic(err)
	}
	http.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var request struct {
			Model string `json:"model"`
		}
		_ = json.NewDecoder(r.Body).Decode(&request)
		entry, found := plans[request.Model]
		if !found {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error": {"message": "no plan for this model", "type": "invalid_request_error", "param": "model", "code": null}}`))
			return
		}
		for name, value := range entry.Headers {
			w.Header().Set(name, value)
		}
		w.WriteHeader(entry.Status)
		streamed := entry.Headers["Content-Type"] != "application/json"
		flusher, _ := w.(http.Flusher)
		for number, data := range entry.Writes {
			if number > 0 && entry.Pause > 0 {
				time.Sleep(time.Duration(entry.Pause * float64(time.Second)))
			}
			bytes, _ := base64.StdEncoding.DecodeString(data)
			_, _ = w.Write(bytes)
			if streamed && flusher != nil {
				flusher.Flush()
			}
		}
	})
	server := &http.Server{Addr: "127.0.0.1:" + os.Args[2]}
	if err := server.ListenAndServe(); err != nil {
		panic(err)
	}
}
