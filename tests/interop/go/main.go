// Command godriver drives Apache's Go client (rocketmq-client-go/v2) against OrbitMQ for the
// interop tier (tests/interop/test_go_client.py). Steps are separated by "+", as for the Java
// driver: `godriver produce --mode sync --topic T ... + push --topic T --group G --expect N`.
// Every event is one JSON line on stdout. Message seq carries the body, keys, tag and user
// properties that tests/interop/messages.py builds, so the test compares them byte for byte.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

var outMu sync.Mutex

func emit(event map[string]interface{}) {
	line, _ := json.Marshal(event)
	outMu.Lock()
	defer outMu.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

type opts map[string]string

func (o opts) get(key string) string {
	value, ok := o[key]
	if !ok {
		panic(fmt.Sprintf("missing --%s for step %s", key, o["step"]))
	}
	return value
}

func (o opts) opt(key, fallback string) string {
	if value, ok := o[key]; ok {
		return value
	}
	return fallback
}

func (o opts) num(key string, fallback int) int {
	if value, ok := o[key]; ok {
		n, err := strconv.Atoi(value)
		if err != nil {
			panic(fmt.Sprintf("--%s %q is not a number", key, value))
		}
		return n
	}
	return fallback
}

func bodyFor(seq, size int) []byte {
	body := make([]byte, size)
	for i := range body {
		body[i] = byte((seq*7+i)%255 + 1)
	}
	return body
}

func sizeFor(seq, size int) int {
	if size > 0 {
		return size
	}
	return 1 + (seq*37)%300
}

func messageFor(o opts, seq int) *primitive.Message {
	msg := primitive.NewMessage(o.get("topic"), bodyFor(seq, sizeFor(seq, o.num("size", 0))))
	switch tags := o.opt("tags", ""); tags {
	case "":
	case "cycle":
		msg.WithTag("Tag" + string(rune('A'+seq%3)))
	default:
		msg.WithTag(tags)
	}
	msg.WithKeys([]string{"key-" + strconv.Itoa(seq), "k" + strconv.Itoa(seq%3)})
	msg.WithProperty("seq", strconv.Itoa(seq))
	msg.WithProperty("origin", o.opt("origin", "go"))
	msg.WithProperty("uprop", "v\u00e4l\u00fc\u00e9-\u6d88\u606f-"+strconv.Itoa(seq))
	color := "blue"
	if seq%2 == 0 {
		color = "red"
	}
	msg.WithProperty("color", color)
	msg.WithProperty("n", strconv.Itoa(seq%10))
	return msg
}

func sentEvent(seq int, r *primitive.SendResult) map[string]interface{} {
	return map[string]interface{}{
		"event": "sent", "seq": seq, "status": r.Status, "msg_id": r.MsgID, "offset_msg_id": r.OffsetMsgID,
		"queue_id": r.MessageQueue.QueueId, "queue_offset": r.QueueOffset, "now_ms": time.Now().UnixMilli(),
	}
}

func receivedEvent(msg *primitive.MessageExt, instance string) map[string]interface{} {
	return map[string]interface{}{
		"event": "received", "instance": instance, "topic": msg.Topic, "tags": nullable(msg.GetTags()),
		"keys": nullable(msg.GetKeys()), "body_hex": hex.EncodeToString(msg.Body), "msg_id": msg.MsgId,
		"queue_id": msg.Queue.QueueId, "queue_offset": msg.QueueOffset, "reconsume_times": msg.ReconsumeTimes,
		"born_ms": msg.BornTimestamp, "now_ms": time.Now().UnixMilli(), "props": msg.GetProperties(),
	}
}

func nullable(s string) interface{} {
	if s == "" {
		return nil
	}
	return s
}

func resolver(o opts) producer.Option {
	return producer.WithNsResolver(primitive.NewPassthroughResolver([]string{o.get("namesrv")}))
}

func produce(o opts) {
	p, err := rocketmq.NewProducer(resolver(o), producer.WithRetry(2),
		producer.WithGroupName(o.opt("group", "go-producer")), producer.WithSendMsgTimeout(10*time.Second))
	check(err)
	check(p.Start())
	defer p.Shutdown()
	ctx := context.Background()
	start, count := o.num("start", 0), o.num("count", 1)
	switch mode := o.opt("mode", "sync"); mode {
	case "sync":
		for seq := start; seq < start+count; seq++ {
			r, err := p.SendSync(ctx, messageFor(o, seq))
			check(err)
			emit(sentEvent(seq, r))
		}
	case "async":
		var wg sync.WaitGroup
		for seq := start; seq < start+count; seq++ {
			wg.Add(1)
			s := seq
			err := p.SendAsync(ctx, func(ctx context.Context, r *primitive.SendResult, err error) {
				defer wg.Done()
				if err != nil {
					emit(map[string]interface{}{"event": "send_error", "seq": s, "error": err.Error()})
					return
				}
				emit(sentEvent(s, r))
			}, messageFor(o, seq))
			check(err)
		}
		wg.Wait()
	case "batch":
		batch := o.num("batch", 50)
		for first := start; first < start+count; first += batch {
			var msgs []*primitive.Message
			for seq := first; seq < first+batch && seq < start+count; seq++ {
				msgs = append(msgs, messageFor(o, seq))
			}
			r, err := p.SendSync(ctx, msgs...)
			check(err)
			ids := strings.Split(r.MsgID, ",")
			for k := range msgs {
				event := sentEvent(first+k, r)
				if len(ids) == len(msgs) {
					event["msg_id"] = ids[k]
				}
				emit(event)
			}
		}
	default:
		panic("unknown produce mode " + mode)
	}
}

func push(o opts) {
	expect := o.num("expect", 0)
	instance := o.opt("instance", "go-consumer")
	var got int64
	done := make(chan struct{})
	var once sync.Once
	c, err := rocketmq.NewPushConsumer(
		consumer.WithGroupName(o.get("group")),
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{o.get("namesrv")})),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithInstance(instance),
	)
	check(err)
	selector := consumer.MessageSelector{Type: consumer.TAG, Expression: o.opt("tag-expr", "*")}
	check(c.Subscribe(o.get("topic"), selector, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, msg := range msgs {
			emit(receivedEvent(msg, instance))
			if atomic.AddInt64(&got, 1) == int64(expect) {
				once.Do(func() { close(done) })
			}
		}
		return consumer.ConsumeSuccess, nil
	}))
	check(c.Start())
	finished := expect == 0
	select {
	case <-done:
		finished = true
	case <-time.After(time.Duration(o.num("timeout-s", 60)) * time.Second):
	}
	time.Sleep(time.Duration(o.num("settle-ms", 0)) * time.Millisecond)
	c.Shutdown()
	emit(map[string]interface{}{"event": "consume_done", "finished": finished, "counts": map[string]int64{instance: atomic.LoadInt64(&got)}})
}

type txListener struct {
	checked sync.Map
}

func (l *txListener) ExecuteLocalTransaction(msg *primitive.Message) primitive.LocalTransactionState {
	seq, _ := strconv.Atoi(msg.GetProperty("seq"))
	return []primitive.LocalTransactionState{primitive.CommitMessageState, primitive.RollbackMessageState, primitive.UnkonwnState}[seq%3]
}

func (l *txListener) CheckLocalTransaction(msg *primitive.MessageExt) primitive.LocalTransactionState {
	seq, _ := strconv.Atoi(msg.GetProperty("seq"))
	l.checked.Store(seq, true)
	emit(map[string]interface{}{"event": "checked", "seq": seq, "msg_id": msg.MsgId, "transaction_id": msg.TransactionId})
	return primitive.CommitMessageState
}

func transaction(o opts) {
	listener := &txListener{}
	p, err := rocketmq.NewTransactionProducer(listener, resolver(o), producer.WithRetry(1),
		producer.WithGroupName(o.opt("group", "go-tx")))
	check(err)
	check(p.Start())
	start, count := o.num("start", 0), o.num("count", 3)
	orphans := 0
	for seq := start; seq < start+count; seq++ {
		r, err := p.SendMessageInTransaction(context.Background(), messageFor(o, seq))
		check(err)
		event := sentEvent(seq, r.SendResult)
		event["local_state"] = map[primitive.LocalTransactionState]string{
			primitive.CommitMessageState: "COMMIT_MESSAGE", primitive.RollbackMessageState: "ROLLBACK_MESSAGE",
			primitive.UnkonwnState: "UNKNOW"}[r.State]
		emit(event)
		if seq%3 == 2 {
			orphans++
		}
	}
	deadline := time.Now().Add(time.Duration(o.num("timeout-s", 60)) * time.Second)
	checked := 0
	for time.Now().Before(deadline) {
		checked = 0
		listener.checked.Range(func(_, _ interface{}) bool { checked++; return true })
		if checked >= orphans {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.Shutdown()
	emit(map[string]interface{}{"event": "transaction_done", "orphans": orphans, "checked": checked})
}

func check(err error) {
	if err != nil {
		panic(err.Error())
	}
}

func run(o opts) {
	switch o["step"] {
	case "produce":
		produce(o)
	case "push":
		push(o)
	case "transaction":
		transaction(o)
	default:
		panic("unknown step " + o["step"])
	}
}

func main() {
	rlog.SetLogLevel("error")
	var steps []opts
	var current opts
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if current == nil || arg == "+" {
			if arg == "+" {
				i++
			}
			current = opts{"step": args[i]}
			steps = append(steps, current)
		} else if strings.HasPrefix(arg, "--") {
			key := arg[2:]
			if i+1 >= len(args) || strings.HasPrefix(args[i+1], "--") || args[i+1] == "+" {
				current[key] = "true"
			} else {
				i++
				current[key] = args[i]
			}
		} else {
			fmt.Fprintf(os.Stderr, "unexpected argument %s\n", arg)
			os.Exit(2)
		}
	}
	status := 0
	for _, step := range steps {
		started := time.Now()
		failed := func() (failed bool) {
			defer func() {
				if r := recover(); r != nil {
					emit(map[string]interface{}{"event": "error", "step": step["step"], "error": fmt.Sprint(r)})
					failed = true
				}
			}()
			run(step)
			return false
		}()
		if failed {
			status = 1
			break
		}
		emit(map[string]interface{}{"event": "step_done", "step": step["step"], "ms": time.Since(started).Milliseconds()})
	}
	os.Exit(status)
}
