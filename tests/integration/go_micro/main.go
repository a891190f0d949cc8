// The Go side of the services interop test (tests/integration/test_service_interop.py):
// a nats.go "micro" service, or a discovery client of services. It is ours; it is built
// offline in GOPATH mode against the nats.go sources of the distribution's package, the
// way benchmarks/native is, and run by the test with the server's URL.
//
//	-mode serve:    start a service -name whose endpoint -subject echoes the request and
//	                answers "fail" with error 422; print its INFO as one JSON line, then
//	                serve until stdin closes, and stop.
//	-mode discover: ask $SRV.PING/INFO/STATS.<name>, call -subject twice (once to fail),
//	                and print one JSON line with the raw answers, what nats.go's micro
//	                types decode of them, and the endpoint's replies.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

var (
	url     = flag.String("url", "nats://127.0.0.1:4222", "server URL")
	mode    = flag.String("mode", "serve", "serve or discover")
	name    = flag.String("name", "gosvc", "service name")
	subject = flag.String("subject", "go.echo", "endpoint subject")
	timeout = flag.Duration("timeout", 10*time.Second, "bound of every request")
)

func fail(err error) {
	fmt.Fprintln(os.Stderr, "go_micro:", err)
	os.Exit(1)
}

func serve(nc *nats.Conn) {
	handler := func(req *micro.Request) {
		if string(req.Data()) == "fail" {
			_ = req.Error("422", "go refuses", []byte("fail body"))
			return
		}
		_ = req.Respond(append([]byte("go:"), req.Data()...))
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        *name,
		Version:     "0.3.1",
		Description: "nats.go micro service for interop",
		Endpoint:    micro.Endpoint{Subject: *subject, Handler: handler},
	})
	if err != nil {
		fail(err)
	}
	if err := nc.Flush(); err != nil {
		fail(err)
	}
	out, _ := json.Marshal(svc.Info())
	fmt.Println(string(out))
	// serve until the test closes stdin
	reader := bufio.NewReader(os.Stdin)
	for {
		if _, err := reader.ReadByte(); err != nil {
			break
		}
	}
	if err := svc.Stop(); err != nil {
		fail(err)
	}
}

// ask sends one discovery request; the raw answer, and it decoded into value.
func ask(nc *nats.Conn, verb string, value interface{}) json.RawMessage {
	msg, err := nc.Request(fmt.Sprintf("$SRV.%s.%s", verb, *name), nil, *timeout)
	if err != nil {
		fail(fmt.Errorf("%s: %w", verb, err))
	}
	if err := json.Unmarshal(msg.Data, value); err != nil {
		fail(fmt.Errorf("%s: %w", verb, err))
	}
	return json.RawMessage(msg.Data)
}

func discover(nc *nats.Conn) {
	var ping micro.Ping
	var info micro.Info
	var stats micro.Stats
	result := map[string]interface{}{
		"ping_raw":  ask(nc, "PING", &ping),
		"info_raw":  ask(nc, "INFO", &info),
		"stats_raw": ask(nc, "STATS", &stats),
	}
	result["ping"] = ping
	result["info"] = info
	result["stats"] = stats
	reply, err := nc.Request(*subject, []byte("from go"), *timeout)
	if err != nil {
		fail(err)
	}
	result["reply"] = string(reply.Data)
	bad, err := nc.Request(*subject, []byte("fail"), *timeout)
	if err != nil {
		fail(err)
	}
	result["error"] = map[string]string{
		"code":        bad.Header.Get(micro.ErrorCodeHeader),
		"description": bad.Header.Get(micro.ErrorHeader),
		"data":        string(bad.Data),
	}
	out, err := json.Marshal(result)
	if err != nil {
		fail(err)
	}
	fmt.Println(string(out))
}

func main() {
	flag.Parse()
	nc, err := nats.Connect(*url, nats.Timeout(*timeout))
	if err != nil {
		fail(err)
	}
	defer nc.Close()
	switch *mode {
	case "serve":
		serve(nc)
	case "discover":
		discover(nc)
	default:
		fail(fmt.Errorf("unknown mode %q", *mode))
	}
}
