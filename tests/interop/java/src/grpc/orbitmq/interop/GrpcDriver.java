package orbitmq.interop;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.ProducerBuilder;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * Drives Apache's 5.x gRPC client (rocketmq-client-java) against OrbitMQ's gRPC proxy, steps
 * separated by "+" as for RemotingDriver, one JSON line per event. Message seq carries what
 * tests/interop/messages.py builds (body, tag, keys, user properties).
 */
public final class GrpcDriver {
    private static final Object OUT = new Object();
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

    private GrpcDriver() {
    }

    public static void main(String[] argv) {
        List<Map<String, String>> steps = new ArrayList<>();
        Map<String, String> current = null;
        for (int i = 0; i < argv.length; i++) {
            String arg = argv[i];
            if (current == null || arg.equals("+")) {
                current = new HashMap<>();
                steps.add(current);
                if (arg.equals("+")) {
                    i++;
                }
                current.put("step", argv[i]);
            } else if (arg.startsWith("--")) {
                boolean flag = i + 1 >= argv.length || argv[i + 1].startsWith("--") || argv[i + 1].equals("+");
                current.put(arg.substring(2), flag ? "true" : argv[++i]);
            } else {
                throw new IllegalArgumentException("unexpected argument " + arg);
            }
        }
        int status = 0;
        for (Map<String, String> step : steps) {
            long started = System.nanoTime();
            try {
                run(step);
            } catch (Throwable e) {
                emit(obj("event", "error", "step", step.get("step"), "error", String.valueOf(e),
                    "trace", Events.stack(e)));
                status = 1;
                break;
            }
            emit(obj("event", "step_done", "step", step.get("step"), "ms", (System.nanoTime() - started) / 1_000_000));
        }
        System.out.flush();
        Runtime.getRuntime().halt(status);
    }

    static String get(Map<String, String> o, String key) {
        String value = o.get(key);
        if (value == null) {
            throw new IllegalArgumentException("missing --" + key);
        }
        return value;
    }

    static int num(Map<String, String> o, String key, int fallback) {
        return o.containsKey(key) ? Integer.parseInt(o.get(key)) : fallback;
    }

    static void run(Map<String, String> o) throws Exception {
        switch (o.get("step")) {
            case "produce": produce(o); break;
            case "simple": simple(o); break;
            case "push": push(o); break;
            default: throw new IllegalArgumentException("unknown step " + o.get("step"));
        }
    }

    static ClientConfiguration config(Map<String, String> o) {
        ClientConfigurationBuilder builder = ClientConfiguration.newBuilder().setEndpoints(get(o, "endpoint"))
            .setRequestTimeout(Duration.ofSeconds(10));
        if (!o.containsKey("tls")) {
            builder.enableSsl(false);  // --tls: the client's default, TLS on
        }
        return builder.build();
    }

    static Message messageFor(Map<String, String> o, int seq, String mode) {
        int size = num(o, "size", 0);
        String tags = o.getOrDefault("tags", "cycle");
        MessageBuilder builder = PROVIDER.newMessageBuilder().setTopic(get(o, "topic"))
            .setBody(Events.bodyFor(seq, Events.sizeFor(seq, size)))
            .setKeys("key-" + seq, "k" + seq % 3)
            .addProperty("seq", String.valueOf(seq))
            .addProperty("origin", o.getOrDefault("origin", "java-grpc"))
            .addProperty("uprop", "v\u00e4l\u00fc\u00e9-\u6d88\u606f-" + seq)
            .addProperty("color", seq % 2 == 0 ? "red" : "blue")
            .addProperty("n", String.valueOf(seq % 10));
        String tag = Events.tagFor(seq, tags);
        if (tag != null) {
            builder.setTag(tag);
        }
        if (mode.equals("fifo")) {
            builder.setMessageGroup("group-" + seq % num(o, "groups", 4));
        } else if (mode.equals("delay")) {
            builder.setDeliveryTimestamp(System.currentTimeMillis() + num(o, "delay-ms", 2000));
        }
        return builder.build();
    }

    static void produce(Map<String, String> o) throws Exception {
        String mode = o.getOrDefault("mode", "normal");
        AtomicInteger checked = new AtomicInteger();
        ProducerBuilder builder = PROVIDER.newProducerBuilder().setClientConfiguration(config(o))
            .setTopics(get(o, "topic"));
        if (mode.equals("transaction")) {
            builder.setTransactionChecker(view -> {
                emit(obj("event", "checked", "seq", Integer.parseInt(view.getProperties().get("seq")),
                    "msg_id", view.getMessageId().toString()));
                checked.incrementAndGet();
                return TransactionResolution.COMMIT;
            });
        }
        Producer producer = builder.build();
        int start = num(o, "start", 0);
        int count = num(o, "count", 1);
        // --orphans N: only the first N transactions of seq % 3 == 2 are left open for the
        // check-back, the others commit at once.
        int orphanLimit = num(o, "orphans", Integer.MAX_VALUE);
        // --in-flight N: sendAsync with up to N sends outstanding (normal and delay messages).
        int inFlight = num(o, "in-flight", 1);
        Semaphore window = new Semaphore(inFlight);
        int orphans = 0;
        for (int seq = start; seq < start + count; seq++) {
            Message msg = messageFor(o, seq, mode);
            SendReceipt receipt;
            if (mode.equals("transaction")) {
                Transaction tx = producer.beginTransaction();
                receipt = producer.send(msg, tx);
                // seq % 3: 0 commits, 1 rolls back, 2 is left open for the check-back
                if (seq % 3 == 0 || (seq % 3 == 2 && (seq - start) / 3 >= orphanLimit)) {
                    tx.commit();
                } else if (seq % 3 == 1) {
                    tx.rollback();
                } else {
                    orphans++;
                }
            } else if (o.containsKey("expect-refused")) {
                // A send the topic's message type does not allow: the exception is the result.
                try {
                    receipt = producer.send(msg);
                } catch (Exception e) {
                    emit(obj("event", "refused", "seq", seq, "error", e.getClass().getName(),
                        "message", String.valueOf(e.getMessage())));
                    continue;
                }
            } else if (inFlight > 1) {
                final int s = seq;
                window.acquire();
                producer.sendAsync(msg).whenComplete((r, e) -> {
                    if (e != null) {
                        emit(obj("event", "send_error", "seq", s, "error", String.valueOf(e)));
                    } else {
                        emit(obj("event", "sent", "seq", s, "status", "SEND_OK",
                            "msg_id", r.getMessageId().toString(), "now_ms", System.currentTimeMillis()));
                    }
                    window.release();
                });
                continue;
            } else {
                receipt = producer.send(msg);
            }
            emit(obj("event", "sent", "seq", seq, "status", "SEND_OK", "msg_id", receipt.getMessageId().toString(),
                "now_ms", System.currentTimeMillis()));
        }
        window.acquire(inFlight);  // every async send answered
        long deadline = System.currentTimeMillis() + num(o, "timeout-s", 60) * 1000L;
        while (checked.get() < orphans && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        producer.close();
    }

    static Map<String, Object> received(MessageView view, String instance) {
        ByteBuffer body = view.getBody();
        byte[] bytes = new byte[body.remaining()];
        body.get(bytes);
        return obj("event", "received", "instance", instance, "topic", view.getTopic(),
            "tags", view.getTag().orElse(null), "keys", String.join(" ", view.getKeys()),
            "body_hex", Events.hex(bytes), "msg_id", view.getMessageId().toString(),
            "message_group", view.getMessageGroup().orElse(null), "delivery_attempt", view.getDeliveryAttempt(),
            "born_ms", view.getBornTimestamp(), "now_ms", System.currentTimeMillis(),
            "props", new TreeMap<>(view.getProperties()));
    }

    static Map<String, FilterExpression> subscription(Map<String, String> o) {
        return Collections.singletonMap(get(o, "topic"),
            new FilterExpression(o.getOrDefault("tag-expr", "*"), FilterExpressionType.TAG));
    }

    static void simple(Map<String, String> o) throws Exception {
        SimpleConsumer consumer = PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config(o))
            .setConsumerGroup(get(o, "group")).setAwaitDuration(Duration.ofSeconds(5))
            .setSubscriptionExpressions(subscription(o)).build();
        int expect = num(o, "expect", 0);
        int got = 0;
        long deadline = System.currentTimeMillis() + num(o, "timeout-s", 60) * 1000L;
        while (got < expect && System.currentTimeMillis() < deadline) {
            // Each batch's acks in flight together (ackAsync), then the next receive.
            List<CompletableFuture<Void>> acks = new ArrayList<>();
            for (MessageView view : consumer.receive(32, Duration.ofSeconds(30))) {
                emit(received(view, "simple"));
                acks.add(consumer.ackAsync(view));
                got++;
            }
            CompletableFuture.allOf(acks.toArray(new CompletableFuture<?>[0])).get(30, TimeUnit.SECONDS);
        }
        consumer.close();
        emit(obj("event", "consume_done", "finished", got >= expect, "counts", obj("simple", got)));
    }

    static void push(Map<String, String> o) throws Exception {
        int expect = num(o, "expect", 0);
        AtomicInteger got = new AtomicInteger();
        CountDownLatch done = new CountDownLatch(1);
        PushConsumer consumer = PROVIDER.newPushConsumerBuilder().setClientConfiguration(config(o))
            .setConsumerGroup(get(o, "group")).setSubscriptionExpressions(subscription(o))
            .setMessageListener(view -> {
                emit(received(view, "push"));
                if (got.incrementAndGet() == expect) {
                    done.countDown();
                }
                return ConsumeResult.SUCCESS;
            }).build();
        boolean finished = expect == 0 || done.await(num(o, "timeout-s", 60), TimeUnit.SECONDS);
        Thread.sleep(num(o, "settle-ms", 0));
        consumer.close();
        emit(obj("event", "consume_done", "finished", finished, "counts", obj("push", got.get())));
    }

    static Map<String, Object> obj(Object... kv) {
        Map<String, Object> map = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            map.put((String) kv[i], kv[i + 1]);
        }
        return map;
    }

    static void emit(Map<String, Object> event) {
        String line = Events.json(event);
        synchronized (OUT) {
            System.out.println(line);
            System.out.flush();
        }
    }
}
