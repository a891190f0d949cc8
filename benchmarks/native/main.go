// The native anchor of the benchmarks: the same workloads as benchmarks/bench_*.py, run
// with the Go client (nats.go, its JetStream API of nc.JetStream()), printing one JSON
// line per measurement in the format of the Python benchmarks' --json. It is ours; it
// is built offline in GOPATH mode against the nats.go sources of the distribution's
// package and run by `python -m benchmarks.bench_native` (`make bench-native`), which
// starts the server and passes its URL.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

const impl = "nats.go"

var (
	url      = flag.String("url", "nats://127.0.0.1:4222", "server URL")
	count    = flag.Int("count", 1000000, "messages per core publish run")
	jsCount  = flag.Int("js-count", 200000, "messages per JetStream workload")
	kvCount  = flag.Int("kv-count", 20000, "keys per KeyValue workload")
	requests = flag.Int("requests", 5000, "requests for the latency rows")
	objMiB   = flag.Int("size", 64, "object size in MiB")
	repeat   = flag.Int("repeat", 5, "runs per measurement (best kept)")
	only     = flag.String("only", "", "families to run: core,js,kv,obj (all when empty)")
	match    = flag.String("match", "", "run only the workloads whose name has this")
	window   = flag.Int("window", 256, "publish_async: outstanding acks")
	srvPid   = flag.Int("server-pid", 0, "the server's pid: print CPU per op (stderr) when set")
	respSubj = flag.String("responder", "", "run only an echo responder on this subject")
	fetchFor = flag.Float64("fetch-loop", 0, "run only fetch+ack, batch 100, over the stored stream BENCH for this many seconds")
)

// procCPU is the CPU seconds (user + system) of process pid so far, from /proc.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100 // USER_HZ
}

func selfCPU() (user, sys float64) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()) / 1e9, float64(ru.Stime.Nano()) / 1e9
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-native:", err)
		os.Exit(1)
	}
}

// emit prints one measurement; cpu, when measured (-server-pid), holds the CPU seconds
// of this process and of the server in the best run.
func emit(workload string, seconds float64, ops int, nbytes int, cpu []float64) {
	line := map[string]any{
		"workload": workload, "impl": impl, "seconds": seconds, "ops": ops, "nbytes": nbytes,
		"ops_per_s": float64(ops) / seconds, "mb_per_s": float64(nbytes) / seconds / 1e6,
	}
	if len(cpu) == 2 {
		line["client_cpu"], line["server_cpu"] = cpu[0], cpu[1]
	}
	b, err := json.Marshal(line)
	check(err)
	fmt.Println(string(b))
}

// best runs fn repeat times and emits the shortest run.
// the CPU used so far by this process (user, system) and the server, at the last start()
var cpu0 [3]float64

// start is a run's time zero (after its setup): it also notes the CPU used so far.
func start() time.Time {
	u, k := selfCPU()
	cpu0 = [3]float64{u, k, procCPU(*srvPid)}
	return time.Now()
}

func best(workload string, ops int, nbytes int, fn func() time.Duration) {
	if *match != "" && !strings.Contains(workload, *match) {
		return
	}
	min := math.Inf(1)
	var cpu []float64
	for i := 0; i < *repeat; i++ {
		secs := fn().Seconds()
		var run []float64
		if *srvPid != 0 {
			u1, k1 := selfCPU()
			srv := procCPU(*srvPid) - cpu0[2]
			us := 1e6 / float64(ops)
			fmt.Fprintf(os.Stderr, "  cpu %-9s %-26s client user %5.2f sys %5.2f, server %5.2f us/op\n",
				impl, workload, (u1-cpu0[0])*us, (k1-cpu0[1])*us, srv*us)
			run = []float64{u1 - cpu0[0] + k1 - cpu0[1], srv}
		}
		if secs < min {
			min, cpu = secs, run
		}
	}
	emit(workload, min, ops, nbytes, cpu)
}

func connect() *nats.Conn {
	nc, err := nats.Connect(*url)
	check(err)
	return nc
}

// ---------------------------------------------------------------- core NATS

func core() {
	n := *count
	for _, size := range []int{16, 1024} {
		label := map[int]string{16: "16 B", 1024: "1 KiB"}[size]
		payload := make([]byte, size)
		best("publish "+label, n, n*size, func() time.Duration {
			nc := connect()
			defer nc.Close()
			t0 := start()
			for i := 0; i < n; i++ {
				check(nc.Publish("bench.pub", payload))
			}
			check(nc.FlushTimeout(60 * time.Second))
			return time.Since(t0)
		})
	}
	for _, size := range []int{16, 1024} {
		label := map[int]string{16: "16 B", 1024: "1 KiB"}[size]
		payload := make([]byte, size)
		m := n / 4
		best("pub->sub "+label, m, m*size, func() time.Duration {
			sc, pc := connect(), connect()
			defer sc.Close()
			defer pc.Close()
			done := make(chan struct{})
			var got int64
			sub, err := sc.Subscribe("bench.ps", func(*nats.Msg) {
				if atomic.AddInt64(&got, 1) == int64(m) {
					close(done)
				}
			})
			check(err)
			check(sub.SetPendingLimits(-1, -1))
			check(sc.Flush())
			t0 := start()
			for i := 0; i < m; i++ {
				check(pc.Publish("bench.ps", payload))
			}
			check(pc.FlushTimeout(60 * time.Second))
			select {
			case <-done:
			case <-time.After(120 * time.Second):
				check(fmt.Errorf("pub->sub: got %d of %d", atomic.LoadInt64(&got), m))
			}
			return time.Since(t0)
		})
	}
	// the echo responder as bench_core's: a subscription callback that publishes the
	// reply, on a connection of its own in this process, then in a second process (this
	// program again, with -responder)
	svc := connect()
	stop := respond(svc, "bench.req")
	latencies("request %s (1/latency)", "bench.req")
	stop()
	cmd := exec.Command(self(), "-url", *url, "-responder", "bench.req.go")
	in, err := cmd.StdinPipe()
	check(err)
	out, err := cmd.StdoutPipe()
	check(err)
	cmd.Stderr = os.Stderr
	check(cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	check(err)
	if strings.TrimSpace(line) != "ready" {
		check(fmt.Errorf("the responder process said %q, not ready", line))
	}
	latencies("request %s, responder in another process (1/latency)", "bench.req.go")
	check(in.Close()) // its end of input: it closes its connection and exits
	check(cmd.Wait())
}

// self is the path of this program, to start it again as a responder.
func self() string {
	exe, err := os.Executable()
	check(err)
	return exe
}

// respond serves subject with an echo callback on nc; the function it returns closes nc.
func respond(nc *nats.Conn, subject string) func() {
	_, err := nc.Subscribe(subject, func(msg *nats.Msg) { _ = msg.Respond(msg.Data) })
	check(err)
	check(nc.Flush())
	return nc.Close
}

// responder is the program run with -responder: it serves the subject, says "ready" once
// the server has its interest, and serves until its standard input ends.
func responder(subject string) {
	stop := respond(connect(), subject)
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	stop()
}

// latencies times *requests sequential requests to subject on a connection of their own
// and emits the p50 and p99 rows of label (%s: p50 or p99).
func latencies(label, subject string) {
	nc := connect()
	defer nc.Close()
	var err error
	for i := 0; i < 50; i++ { // until the responder's interest is seen
		if _, err = nc.Request(subject, []byte("warm"), 5*time.Second); err != nats.ErrNoResponders {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	check(err)
	lat := make([]float64, 0, *requests)
	payload := make([]byte, 16)
	for i := 0; i < *requests; i++ {
		t0 := start()
		_, err := nc.Request(subject, payload, 5*time.Second)
		check(err)
		lat = append(lat, time.Since(t0).Seconds())
	}
	sort.Float64s(lat)
	pct := func(q float64) float64 { return lat[int(math.Min(float64(len(lat)-1), q*float64(len(lat))))] }
	emit(fmt.Sprintf(label, "p50"), pct(0.5), 1, 0, nil)
	emit(fmt.Sprintf(label, "p99"), pct(0.99), 1, 0, nil)
}

// ---------------------------------------------------------------- JetStream

var jsPayload = make([]byte, 128)

// A full window waits for acks as the Python clients' publish_async does, instead of
// failing after nats.go's default of 200 ms ("stalled with too many outstanding async
// published messages"), which a loaded 2-core machine reaches.
var stall = nats.StallWait(60 * time.Second)

type bench struct {
	nc *nats.Conn
	js nats.JetStreamContext
}

func (b *bench) freshStream(stored int) {
	_ = b.js.DeleteStream("BENCH")
	_, err := b.js.AddStream(&nats.StreamConfig{
		Name: "BENCH", Subjects: []string{"bench"}, Storage: nats.MemoryStorage,
	})
	check(err)
	for i := 0; i < stored; i++ {
		_, err := b.js.PublishAsync("bench", jsPayload, stall)
		check(err)
	}
	<-b.js.PublishAsyncComplete()
}

func (b *bench) fetchAck(n, batch int, confirmed bool) time.Duration {
	b.freshStream(n)
	sub, err := b.js.PullSubscribe("bench", "b", nats.MaxAckPending(-1))
	check(err)
	defer func() { _ = sub.Unsubscribe() }()
	t0 := start()
	for got := 0; got < n; {
		msgs, err := sub.Fetch(min(batch, n-got), nats.MaxWait(5*time.Second))
		check(err)
		if confirmed {
			var wg sync.WaitGroup
			for _, m := range msgs {
				wg.Add(1)
				go func(m *nats.Msg) { defer wg.Done(); check(m.AckSync()) }(m)
			}
			wg.Wait()
		} else {
			for _, m := range msgs {
				check(m.Ack())
			}
		}
		got += len(msgs)
	}
	check(b.nc.Flush())
	return time.Since(t0)
}

func (b *bench) ordered(n int) time.Duration {
	b.freshStream(n)
	done := make(chan struct{})
	got := 0
	t0 := start()
	sub, err := b.js.Subscribe("bench", func(*nats.Msg) {
		got++ // one goroutine delivers a subscription's messages
		if got == n {
			close(done)
		}
	}, nats.OrderedConsumer())
	check(err)
	<-done
	el := time.Since(t0)
	check(sub.Unsubscribe())
	return el
}

func (b *bench) ackSync(n, concurrent int) time.Duration {
	b.freshStream(n)
	sub, err := b.js.PullSubscribe("bench", "s", nats.MaxAckPending(n+1))
	check(err)
	defer func() { _ = sub.Unsubscribe() }()
	var msgs []*nats.Msg
	for len(msgs) < n {
		got, err := sub.Fetch(min(500, n-len(msgs)), nats.MaxWait(5*time.Second))
		check(err)
		msgs = append(msgs, got...)
	}
	t0 := start()
	if concurrent == 0 {
		for _, m := range msgs {
			check(m.AckSync())
		}
	} else {
		for i := 0; i < n; i += concurrent {
			var wg sync.WaitGroup
			for _, m := range msgs[i:min(n, i+concurrent)] {
				wg.Add(1)
				go func(m *nats.Msg) { defer wg.Done(); check(m.AckSync()) }(m)
			}
			wg.Wait()
		}
	}
	return time.Since(t0)
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// fetchLoop fetches and acks (one Ack a message, batch 100) the messages stored in the
// stream BENCH, again and again with a new durable consumer each pass, for the given
// seconds; it prints how many messages it acked (for benchmarks/server_profile.py, which
// profiles the server meanwhile).
func fetchLoop(seconds float64) {
	nc := connect()
	defer nc.Close()
	js, err := nc.JetStream()
	check(err)
	info, err := js.StreamInfo("BENCH")
	check(err)
	n := int(info.State.Msgs)
	end := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	acked := 0
	for pass := 0; time.Now().Before(end); pass++ {
		sub, err := js.PullSubscribe("bench", fmt.Sprintf("loop%d", pass), nats.MaxAckPending(-1))
		check(err)
		for got := 0; got < n && time.Now().Before(end); {
			msgs, err := sub.Fetch(min(100, n-got), nats.MaxWait(5*time.Second))
			check(err)
			for _, m := range msgs {
				check(m.Ack())
			}
			got += len(msgs)
			acked += len(msgs)
		}
		check(sub.Unsubscribe()) // the consumer it made goes with it
	}
	check(nc.Flush())
	fmt.Println(acked)
}

func jetStream() {
	nc := connect()
	defer nc.Close()
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(*window))
	check(err)
	b := &bench{nc, js}
	n := *jsCount
	best("sync publish", n/10, 0, func() time.Duration {
		b.freshStream(0)
		t0 := start()
		for i := 0; i < n/10; i++ {
			_, err := js.Publish("bench", jsPayload)
			check(err)
		}
		return time.Since(t0)
	})
	best("publish_async", n, 0, func() time.Duration {
		b.freshStream(0)
		t0 := start()
		for i := 0; i < n; i++ {
			_, err := js.PublishAsync("bench", jsPayload, stall)
			check(err)
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(120 * time.Second):
			check(fmt.Errorf("publish_async: acks missing after 120 s"))
		}
		return time.Since(t0)
	})
	// one m.Ack() a message, as the Python benchmarks' headline fetch+ack rows: nats.go has
	// no call that acks a batch (no ack_all), so there is no "fetch+ack_all" row here
	best("fetch+ack batch 100", n, 0, func() time.Duration { return b.fetchAck(n, 100, false) })
	best("fetch+ack batch 500", n, 0, func() time.Duration { return b.fetchAck(n, 500, false) })
	best("fetch+ack_sync batch 500", n, 0, func() time.Duration { return b.fetchAck(n, 500, true) })
	// the legacy API's ordered consumer is push-based, with flow control: both rows
	best("ordered replay", n, 0, func() time.Duration { return b.ordered(n) })
	best("ordered replay, push", n, 0, func() time.Duration { return b.ordered(n) })
	best("ack_sync", n/20, 0, func() time.Duration { return b.ackSync(n/20, 0) })
	best("ack_sync 100 at a time", n/10, 0, func() time.Duration { return b.ackSync(n/10, 100) })
}

// ---------------------------------------------------------------- KeyValue

func keyValue() {
	nc := connect()
	defer nc.Close()
	js, err := nc.JetStream()
	check(err)
	n := *kvCount
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k.%d", i)
	}
	value := make([]byte, 64)
	fresh := func(fill bool) nats.KeyValue {
		_ = js.DeleteKeyValue("BENCH")
		kv, err := js.CreateKeyValue(&nats.KeyValueConfig{Bucket: "BENCH", Storage: nats.MemoryStorage})
		check(err)
		if fill {
			for _, k := range keys {
				_, err := js.PublishAsync("$KV.BENCH."+k, value, stall)
				check(err)
			}
			<-js.PublishAsyncComplete()
		}
		return kv
	}
	best("put", n, 0, func() time.Duration {
		kv := fresh(false)
		t0 := start()
		for _, k := range keys {
			_, err := kv.Put(k, value)
			check(err)
		}
		return time.Since(t0)
	})
	best("get", n, 0, func() time.Duration {
		kv := fresh(true)
		t0 := start()
		for _, k := range keys {
			_, err := kv.Get(k)
			check(err)
		}
		return time.Since(t0)
	})
	best("watch (until up to date)", n, 0, func() time.Duration {
		kv := fresh(true)
		t0 := start()
		w, err := kv.WatchAll()
		check(err)
		got := 0
		for e := range w.Updates() {
			if e == nil {
				break
			}
			got++
		}
		el := time.Since(t0)
		check(w.Stop())
		if got != n {
			check(fmt.Errorf("watch: %d of %d", got, n))
		}
		return el
	})
}

// ---------------------------------------------------------------- ObjectStore

func objectStore() {
	nc := connect()
	defer nc.Close()
	js, err := nc.JetStream()
	check(err)
	obs, err := js.CreateObjectStore(&nats.ObjectStoreConfig{Bucket: "bench_go"})
	check(err)
	defer func() { _ = js.DeleteObjectStore("bench_go") }()
	size := *objMiB << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	label := fmt.Sprintf("%d MiB", *objMiB)
	best("put "+label, 1, size, func() time.Duration {
		t0 := start()
		_, err := obs.PutBytes("obj", data)
		check(err)
		return time.Since(t0)
	})
	best("get "+label+" (bytes)", 1, size, func() time.Duration {
		t0 := start()
		got, err := obs.GetBytes("obj")
		check(err)
		if len(got) != size {
			check(fmt.Errorf("get: %d bytes of %d", len(got), size))
		}
		return time.Since(t0)
	})
	best("get "+label+" (stream)", 1, size, func() time.Duration {
		t0 := start()
		r, err := obs.Get("obj")
		check(err)
		k, err := io.Copy(io.Discard, r)
		check(err)
		check(r.Close())
		if int(k) != size {
			check(fmt.Errorf("get: %d bytes of %d", k, size))
		}
		return time.Since(t0)
	})
}

func main() {
	flag.Parse()
	if *respSubj != "" {
		responder(*respSubj)
		return
	}
	if *fetchFor > 0 {
		fetchLoop(*fetchFor)
		return
	}
	run := func(family string) bool {
		if *only == "" {
			return true
		}
		for _, f := range splitComma(*only) {
			if f == family {
				return true
			}
		}
		return false
	}
	if run("core") {
		core()
	}
	if run("js") {
		jetStream()
	}
	if run("kv") {
		keyValue()
	}
	if run("obj") {
		objectStore()
	}
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}
