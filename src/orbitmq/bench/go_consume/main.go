// Command goconsume is a child process of `bench consume --compare-defaults`: Apache's Go
// client (rocketmq-client-go/v2) as a push consumer with every default a RocketMQ user keeps
// (PullBatchSize 32, ConsumeMessageBatchMaxSize 1, 20 consume goroutines, PullInterval 0, its
// flow-control thresholds), set only where a new group starts: ConsumeFromFirstOffset, so that
// it reads the backlog the benchmark stored before it. The listener only counts.
//
// Arguments: namesrv topic group count timeout_s. When `count` messages have arrived, or after
// `timeout_s`, one JSON line is printed: {"count": n, "started": t, "first": t, "last": t,
// "cpu_s": s}: seconds of CLOCK_MONOTONIC (Python's time.monotonic()), and the CPU seconds this
// process spent until then (start-up included). Then the consumer shuts down. With the
// environment variable GOCONSUME_CPU_PROFILE set, a pprof CPU profile of the run is written to
// the file it names (`go tool pprof -top goconsume FILE` shows where the client's CPU goes).
package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

const clockMonotonic = 1

// monotonicS reads CLOCK_MONOTONIC (Go's time package keeps its own reading private).
func monotonicS() float64 {
	var ts syscall.Timespec
	_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		fail("clock_gettime: %v", errno)
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

func cpuS() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		fail("getrusage: %v", err)
	}
	seconds := func(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
	return seconds(usage.Utime) + seconds(usage.Stime)
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "goconsume: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	// The base pair turns Go's monotonic times into CLOCK_MONOTONIC seconds without a system
	// call per message.
	baseTime, baseS := time.Now(), monotonicS()
	at := func(t time.Time) float64 { return baseS + t.Sub(baseTime).Seconds() }
	if len(os.Args) != 6 {
		fail("usage: goconsume namesrv topic group count timeout_s")
	}
	namesrv, topic, group := os.Args[1], os.Args[2], os.Args[3]
	count, err := strconv.ParseInt(os.Args[4], 10, 64)
	if err != nil || count < 1 {
		fail("count %q is not a positive number", os.Args[4])
	}
	timeoutS, err := strconv.ParseFloat(os.Args[5], 64)
	if err != nil || timeoutS <= 0 {
		fail("timeout_s %q is not a positive number", os.Args[5])
	}
	rlog.SetLogLevel("error")
	if path := os.Getenv("GOCONSUME_CPU_PROFILE"); path != "" {
		profile, err := os.Create(path)
		if err != nil {
			fail("cpu profile: %v", err)
		}
		if err := pprof.StartCPUProfile(profile); err != nil {
			fail("cpu profile: %v", err)
		}
	}

	var received int64
	var first, last atomic.Pointer[time.Time]
	done := make(chan struct{})
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNameServer(primitive.NamesrvAddr{namesrv}),
		consumer.WithGroupName(group),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		fail("new push consumer: %v", err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			seen := atomic.AddInt64(&received, int64(len(msgs)))
			if first.Load() == nil {
				now := time.Now()
				first.CompareAndSwap(nil, &now)
			}
			if seen >= count && last.Load() == nil {
				now := time.Now()
				if last.CompareAndSwap(nil, &now) {
					close(done)
				}
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		fail("subscribe: %v", err)
	}
	if err := c.Start(); err != nil {
		fail("start: %v", err)
	}
	select {
	case <-done:
	case <-time.After(time.Duration(timeoutS * float64(time.Second))):
	}
	pprof.StopCPUProfile()
	lastS := monotonicS()
	if t := last.Load(); t != nil {
		lastS = at(*t)
	}
	firstS := 0.0
	if t := first.Load(); t != nil {
		firstS = at(*t)
	}
	got := atomic.LoadInt64(&received)
	if got > count {
		got = count
	}
	fmt.Printf("{\"count\": %d, \"started\": %.6f, \"first\": %.6f, \"last\": %.6f, \"cpu_s\": %.3f}\n",
		got, baseS, firstS, lastS, cpuS())
	os.Stdout.Sync()
	// Shutdown commits the offsets and unregisters; a broker gone meanwhile must not hold the exit.
	stopped := make(chan struct{})
	go func() {
		_ = c.Shutdown()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
	}
}
