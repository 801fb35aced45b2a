// kfold's test app for the real node: one image that runs as a Session's workspace or as any of
// its apps by the identity kfold gives each container (docs/session-api.md "Container identity"):
//
//	KFOLD_CONTAINER  "workspace" or "app-<name>"
//	KFOLD_APP        the app's name (apps only)
//	KFOLD_APP_PORTS  the app's declared ports, "8080/TCP,9000/UDP" (apps only)
//
// An app serves HTTP on each declared TCP port (GET / answers "<container> <port>\n") and logs
// "kfold-testapp: <container> listening on <port>" once per port; the workspace logs one line and
// waits. TESTAPP_EXIT=<code> makes the container log a line and exit with that code instead;
// TESTAPP_EXIT=<container>=<code>,... (e.g. "app-done=0,app-bad=1") does so only in the containers
// it names (one env for every container of a pod, as a Session's env is), the others run as above;
// TESTAPP_GET=<url> (a client for tests) prints the body of one GET of url and exits 0, or 1.
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("kfold-testapp: ")
	who := os.Getenv("KFOLD_CONTAINER")
	if who == "" {
		log.Print("KFOLD_CONTAINER is not set: this image runs as a kfold Session's container")
		os.Exit(2)
	}
	if url := os.Getenv("TESTAPP_GET"); url != "" {
		resp, err := http.Get(url)
		if err != nil {
			log.Printf("GET %s: %v", url, err)
			os.Exit(1)
		}
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("%s", body)
		os.Exit(0)
	}
	if code := exitCode(who, os.Getenv("TESTAPP_EXIT")); code != "" {
		n, err := strconv.Atoi(code)
		if err != nil {
			log.Printf("TESTAPP_EXIT=%q is not an integer", code)
			os.Exit(2)
		}
		log.Printf("%s exiting with %d", who, n)
		os.Exit(n)
	}
	for _, p := range strings.Split(os.Getenv("KFOLD_APP_PORTS"), ",") {
		port, proto, _ := strings.Cut(p, "/")
		if port == "" || proto != "TCP" {
			continue
		}
		mux := http.NewServeMux()
		answer := fmt.Sprintf("%s %s\n", who, port)
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, answer) })
		go func(port string) {
			log.Fatal(http.ListenAndServe(":"+port, mux))
		}(port)
		log.Printf("%s listening on %s", who, port)
	}
	if !strings.HasPrefix(who, "app-") {
		log.Printf("%s ready", who)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	log.Printf("%s stopping", who)
}

// exitCode is the code TESTAPP_EXIT gives container who ("" = none: it runs): the whole value when
// it names no container, else the code of the entry "<who>=<code>".
func exitCode(who, value string) string {
	if !strings.Contains(value, "=") {
		return value
	}
	for _, entry := range strings.Split(value, ",") {
		if name, code, _ := strings.Cut(entry, "="); name == who {
			return code
		}
	}
	return ""
}
