package orbitmq.interop;

import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * Drives the Apache RocketMQ remoting client (4.9.x or 5.x: the same source compiles against
 * both) through the steps named on the command line, printing one JSON line per event.
 *
 * <pre>java orbitmq.interop.RemotingDriver STEP --opt value ... [+ STEP --opt value ...]</pre>
 *
 * Steps run one after the other in one JVM. Message i carries the body Events.bodyFor(i, size(i)),
 * keys "key-i ki%3", the tag given (or TagA/TagB/TagC by i%3 with --tags cycle) and the user
 * properties seq=i, origin=java, uprop=&lt;non-ASCII text&gt;-i: tests/interop/messages.py
 * builds the same messages and compares them byte for byte with what a consumer printed.
 */
public final class RemotingDriver {
    private static final Object OUT = new Object();
    private static final AtomicInteger INSTANCES = new AtomicInteger();

    private RemotingDriver() {
    }

    public static void main(String[] argv) throws Exception {
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
                String key = arg.substring(2);
                boolean flag = i + 1 >= argv.length || argv[i + 1].startsWith("--") || argv[i + 1].equals("+");
                current.put(key, flag ? "true" : argv[++i]);
            } else {
                throw new IllegalArgumentException("unexpected argument " + arg);
            }
        }
        int status = 0;
        for (Map<String, String> step : steps) {
            long started = System.nanoTime();
            try {
                run(new Opts(step));
            } catch (Throwable e) {
                emit(obj("event", "error", "step", step.get("step"), "error", String.valueOf(e), "trace", Events.stack(e)));
                status = 1;
                break;
            }
            emit(obj("event", "step_done", "step", step.get("step"), "ms", (System.nanoTime() - started) / 1_000_000));
        }
        System.out.flush();
        Runtime.getRuntime().halt(status);  // client threads linger after shutdown()
    }

    private static void run(Opts o) throws Exception {
        switch (o.get("step")) {
            case "produce": produce(o); break;
            case "push": push(o); break;
            case "litepull": litePull(o); break;
            case "transaction": transaction(o); break;
            case "request": request(o); break;
            case "querykey": queryKey(o); break;
            case "sleep": Thread.sleep(o.num("ms", 1000)); break;
            default: throw new IllegalArgumentException("unknown step " + o.get("step"));
        }
    }

    // ---- messages ------------------------------------------------------------------------

    static Message messageFor(Opts o, int seq) {
        Message msg = new Message(o.get("topic"), Events.bodyFor(seq, Events.sizeFor(seq, o.num("size", 0))));
        String tag = Events.tagFor(seq, o.opt("tags", ""));
        if (tag != null) {
            msg.setTags(tag);
        }
        msg.setKeys("key-" + seq + " k" + seq % 3);
        msg.putUserProperty("seq", String.valueOf(seq));
        msg.putUserProperty("origin", o.opt("origin", "java"));
        msg.putUserProperty("uprop", "v\u00e4l\u00fc\u00e9-\u6d88\u606f-" + seq);
        msg.putUserProperty("color", seq % 2 == 0 ? "red" : "blue");
        msg.putUserProperty("n", String.valueOf(seq % 10));
        return msg;
    }

    static Map<String, Object> received(MessageExt msg, String instance) {
        Map<String, String> props = new TreeMap<>(msg.getProperties());
        return obj("event", "received", "instance", instance, "topic", msg.getTopic(), "tags", msg.getTags(),
            "keys", msg.getKeys(), "body_hex", Events.hex(msg.getBody()), "msg_id", msg.getMsgId(),
            "queue_id", msg.getQueueId(), "queue_offset", msg.getQueueOffset(),
            "reconsume_times", msg.getReconsumeTimes(), "born_ms", msg.getBornTimestamp(),
            "store_ms", msg.getStoreTimestamp(), "now_ms", System.currentTimeMillis(), "props", props);
    }

    static Map<String, Object> sent(int seq, SendResult r) {
        return obj("event", "sent", "seq", seq, "status", String.valueOf(r.getSendStatus()), "msg_id", r.getMsgId(),
            "offset_msg_id", r.getOffsetMsgId(), "broker", r.getMessageQueue().getBrokerName(),
            "queue_id", r.getMessageQueue().getQueueId(), "queue_offset", r.getQueueOffset(),
            "now_ms", System.currentTimeMillis());
    }

    // ---- clients -------------------------------------------------------------------------

    static RPCHook hook(Opts o) {
        if (!o.has("access-key")) {
            return null;
        }
        return new AclClientRPCHook(new SessionCredentials(o.get("access-key"), o.get("secret-key")));
    }

    static void configure(org.apache.rocketmq.client.ClientConfig client, Opts o, String instance) {
        client.setNamesrvAddr(o.get("namesrv"));
        client.setInstanceName(instance);
        client.setUseTLS(o.has("tls"));
        client.setVipChannelEnabled(false);
        client.setPollNameServerInterval(1000);
        client.setHeartbeatBrokerInterval(1000);
        client.setPersistConsumerOffsetInterval(1000);
        // The defaults (3 s) are short for two cores shared with other tests; Apache's broker on
        // such a machine needs the same.
        client.setMqClientApiTimeout(10_000);
    }

    static DefaultMQProducer producer(Opts o) throws Exception {
        DefaultMQProducer producer = o.has("trace")
            ? new DefaultMQProducer(o.opt("group", "java-producer"), hook(o), true, null)
            : new DefaultMQProducer(o.opt("group", "java-producer"), hook(o));
        // An instance of its own per producer: a step's producer shuts down behind the next one,
        // and producers of one instance share a client (and its shutdown).
        configure(producer, o, o.opt("instance", "producer") + "-" + ProcessHandle.current().pid() + "-" + INSTANCES.incrementAndGet());
        producer.setSendMsgTimeout(o.num("send-timeout-ms", 10_000));
        producer.setRetryTimesWhenSendAsyncFailed(2);
        producer.start();
        return producer;
    }

    // ---- steps ---------------------------------------------------------------------------

    static void produce(Opts o) throws Exception {
        DefaultMQProducer producer = producer(o);
        String mode = o.opt("mode", "sync");
        int start = o.num("start", 0);
        int count = o.num("count", 1);
        int paceMs = o.num("pace-ms", 0);  // a pause after each sync send
        try {
            switch (mode) {
                case "sync":
                case "delay":
                case "deliver":
                    for (int seq = start; seq < start + count; seq++) {
                        Message msg = messageFor(o, seq);
                        if (mode.equals("delay")) {
                            msg.setDelayTimeLevel(o.num("delay-level", 1));
                        } else if (mode.equals("deliver")) {
                            setDeliverTimeMs(msg, System.currentTimeMillis() + o.num("deliver-after-ms", 2000));
                        }
                        emit(sent(seq, producer.send(msg)));
                        if (paceMs > 0) {
                            Thread.sleep(paceMs);
                        }
                    }
                    break;
                case "async": {
                    CountDownLatch done = new CountDownLatch(count);
                    for (int seq = start; seq < start + count; seq++) {
                        final int s = seq;
                        producer.send(messageFor(o, seq), new SendCallback() {
                            @Override
                            public void onSuccess(SendResult r) {
                                emit(sent(s, r));
                                done.countDown();
                            }

                            @Override
                            public void onException(Throwable e) {
                                emit(obj("event", "send_error", "seq", s, "error", String.valueOf(e)));
                                done.countDown();
                            }
                        });
                    }
                    if (!done.await(o.num("timeout-s", 60), TimeUnit.SECONDS)) {
                        throw new IllegalStateException("async sends unfinished: " + done.getCount());
                    }
                    break;
                }
                case "oneway":
                    for (int seq = start; seq < start + count; seq++) {
                        producer.sendOneway(messageFor(o, seq));
                        emit(obj("event", "sent", "seq", seq, "status", "ONEWAY"));
                    }
                    break;
                case "batch": {
                    int batch = o.num("batch", 50);
                    for (int first = start; first < start + count; first += batch) {
                        List<Message> msgs = new ArrayList<>();
                        for (int seq = first; seq < Math.min(first + batch, start + count); seq++) {
                            msgs.add(messageFor(o, seq));
                        }
                        SendResult r = producer.send(msgs);
                        String[] ids = r.getMsgId().split(",");
                        for (int k = 0; k < msgs.size(); k++) {
                            emit(obj("event", "sent", "seq", first + k, "status", String.valueOf(r.getSendStatus()),
                                "msg_id", ids.length == msgs.size() ? ids[k] : r.getMsgId(),
                                "queue_id", r.getMessageQueue().getQueueId(), "queue_offset", r.getQueueOffset() + k));
                        }
                    }
                    break;
                }
                case "orderly":
                    for (int seq = start; seq < start + count; seq++) {
                        int shard = seq % o.num("shards", 4);
                        SendResult r = producer.send(messageFor(o, seq),
                            (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size()), shard);
                        Map<String, Object> event = sent(seq, r);
                        event.put("shard", shard);
                        emit(event);
                    }
                    break;
                default:
                    throw new IllegalArgumentException("unknown produce mode " + mode);
            }
        } finally {
            if (o.has("trace")) {
                producer.shutdown();  // flushes the trace records still queued
            } else {
                shutdownBehind(producer::shutdown);
            }
        }
    }

    static void shutdownBehind(Runnable shutdown) {
        // The 5.x client's shutdown joins its service threads for seconds: later steps need not wait.
        Thread thread = new Thread(shutdown, "shutdown-behind");
        thread.setDaemon(true);
        thread.start();
    }

    static void setDeliverTimeMs(Message msg, long at) throws Exception {
        // Message.setDeliverTimeMs exists from the 5.x client on; the 4.9.x client lacks it.
        Method setter = Message.class.getMethod("setDeliverTimeMs", long.class);
        setter.invoke(msg, at);
    }

    static void push(Opts o) throws Exception {
        // --expect: messages in all (clustering) or per instance (broadcasting).
        int instances = o.num("instances", 1);
        int expect = o.num("expect", 0);
        boolean broadcasting = o.opt("model", "clustering").equals("broadcasting");
        AtomicInteger total = new AtomicInteger();
        boolean distinct = o.has("distinct");
        Set<String> seenAll = ConcurrentHashMap.newKeySet();
        boolean fail = o.has("reconsume-later");
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        Map<String, AtomicInteger> counts = new ConcurrentHashMap<>();
        CountDownLatch done = new CountDownLatch(broadcasting ? instances : 1);
        String group = o.get("group");
        for (int k = 0; k < instances; k++) {
            String instance = o.opt("instance", "consumer") + "-" + k;
            AtomicInteger count = new AtomicInteger();
            counts.put(instance, count);
            DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group, hook(o), new AllocateMessageQueueAveragely(),
                o.has("trace"), null);
            configure(consumer, o, instance);
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            setMessageModel(consumer, o.opt("model", "clustering").toUpperCase());
            consumer.setMaxReconsumeTimes(o.num("max-reconsume-times", 16));
            consumer.setConsumeMessageBatchMaxSize(1);
            if (o.has("sql")) {
                consumer.subscribe(o.get("topic"), MessageSelector.bySql(o.get("sql")));
            } else {
                consumer.subscribe(o.get("topic"), o.opt("tag-expr", "*"));
            }
            Set<String> seenHere = ConcurrentHashMap.newKeySet();
            java.util.function.Consumer<MessageExt> counted = msg -> {
                if (distinct && !(broadcasting ? seenHere : seenAll).add(msg.getUserProperty("seq"))) {
                    return;  // a repeat (after a rebalance) is printed, not counted
                }
                int mine = count.incrementAndGet();
                int all = total.incrementAndGet();
                if ((broadcasting ? mine : all) == expect) {
                    done.countDown();
                }
            };
            if (o.opt("listener", "concurrently").equals("orderly")) {
                consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
                    for (MessageExt msg : msgs) {
                        emit(received(msg, instance));
                        counted.accept(msg);
                    }
                    return ConsumeOrderlyStatus.SUCCESS;
                });
            } else {
                consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                    for (MessageExt msg : msgs) {
                        emit(received(msg, instance));
                        counted.accept(msg);
                    }
                    return fail ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                });
            }
            consumers.add(consumer);
        }
        for (DefaultMQPushConsumer consumer : consumers) {
            consumer.start();
        }
        emit(obj("event", "consumers_started", "group", group));
        boolean finished = expect == 0 || done.await(o.num("timeout-s", 60), TimeUnit.SECONDS);
        if (o.has("settle-ms")) {
            Thread.sleep(o.num("settle-ms", 0));
        }
        for (DefaultMQPushConsumer consumer : consumers) {
            consumer.shutdown();
        }
        Map<String, Object> counted = new TreeMap<>();
        counts.forEach((name, n) -> counted.put(name, n.get()));
        emit(obj("event", "consume_done", "finished", finished, "counts", counted));
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void setMessageModel(DefaultMQPushConsumer consumer, String model) throws Exception {
        // MessageModel moved from org.apache.rocketmq.common.protocol.heartbeat (4.9.x) to
        // org.apache.rocketmq.remoting.protocol.heartbeat (5.x): reach it through the getter.
        Class type = consumer.getMessageModel().getClass();
        Method setter = DefaultMQPushConsumer.class.getMethod("setMessageModel", type);
        setter.invoke(consumer, Enum.valueOf(type, model));
    }

    static void litePull(Opts o) throws Exception {
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(o.get("group"), hook(o));
        configure(consumer, o, o.opt("instance", "lite") + "-" + ProcessHandle.current().pid() + "-" + INSTANCES.incrementAndGet());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPollTimeoutMillis(1000);
        int expect = o.num("expect", 0);
        String topic = o.get("topic");
        boolean assign = o.opt("mode", "subscribe").equals("assign");
        if (!assign) {
            consumer.subscribe(topic, o.opt("tag-expr", "*"));
        }
        consumer.start();
        if (assign) {
            Collection<MessageQueue> queues = consumer.fetchMessageQueues(topic);
            consumer.assign(queues);
            long seekOffset = o.num("seek-offset", 0);
            for (MessageQueue mq : queues) {
                consumer.seek(mq, seekOffset);
            }
        }
        long deadline = System.currentTimeMillis() + o.num("timeout-s", 60) * 1000L;
        // Distinct messages: a rebalance may hand a queue back from its committed offset, and the
        // repeats must not end the step before the queue's tail arrived.
        Set<String> seen = new java.util.HashSet<>();
        int got = 0;
        while (got < expect && System.currentTimeMillis() < deadline) {
            for (MessageExt msg : consumer.poll(1000)) {
                emit(received(msg, o.opt("instance", "lite")));
                boolean beforeSeek = assign && msg.getQueueOffset() < o.num("seek-offset", 0);
                if (!beforeSeek && seen.add(msg.getUserProperty("seq"))) {
                    got++;
                }
            }
        }
        consumer.commitSync();
        consumer.shutdown();
        emit(obj("event", "consume_done", "finished", got >= expect, "counts", obj(o.opt("instance", "lite"), got)));
    }

    static void transaction(Opts o) throws Exception {
        // seq % 3: 0 commits at once, 1 rolls back at once, 2 answers UNKNOW and commits on the
        // broker's check-back (the orphan a producer crash would leave); with --orphans N only
        // the first N of those are left to the check-back, the others commit at once.
        int start = o.num("start", 0);
        int orphanLimit = o.num("orphans", Integer.MAX_VALUE);
        Map<String, AtomicInteger> checks = new ConcurrentHashMap<>();
        TransactionMQProducer producer = new TransactionMQProducer(o.opt("group", "java-tx"), hook(o));
        configure(producer, o, "tx-" + ProcessHandle.current().pid() + "-" + INSTANCES.incrementAndGet());
        producer.setSendMsgTimeout(o.num("send-timeout-ms", 10_000));
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                int seq = Integer.parseInt(msg.getUserProperty("seq"));
                return seq % 3 == 0 || (seq % 3 == 2 && !isOrphan(seq, start, orphanLimit))
                    ? LocalTransactionState.COMMIT_MESSAGE
                    : seq % 3 == 1 ? LocalTransactionState.ROLLBACK_MESSAGE : LocalTransactionState.UNKNOW;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                String seq = msg.getUserProperty("seq");
                checks.computeIfAbsent(seq, s -> new AtomicInteger()).incrementAndGet();
                emit(obj("event", "checked", "seq", Integer.parseInt(seq), "msg_id", msg.getMsgId(),
                    "transaction_id", msg.getTransactionId()));
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        producer.start();
        int count = o.num("count", 3);
        int orphans = 0;
        for (int seq = start; seq < start + count; seq++) {
            TransactionSendResult r = producer.sendMessageInTransaction(messageFor(o, seq), null);
            Map<String, Object> event = sent(seq, r);
            event.put("local_state", String.valueOf(r.getLocalTransactionState()));
            event.put("transaction_id", r.getTransactionId());
            emit(event);
            if (seq % 3 == 2 && isOrphan(seq, start, orphanLimit)) {
                orphans++;
            }
        }
        long deadline = System.currentTimeMillis() + o.num("timeout-s", 60) * 1000L;
        while (checks.size() < orphans && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        shutdownBehind(producer::shutdown);
        emit(obj("event", "transaction_done", "orphans", orphans, "checked", checks.size()));
    }

    static boolean isOrphan(int seq, int start, int orphanLimit) {
        return (seq - start) / 3 < orphanLimit;
    }

    static void request(Opts o) throws Exception {
        // A replier (a push consumer answering through its own producer) and a requester.
        DefaultMQProducer replyProducer = producer(o.with("instance", "replier-producer"));
        DefaultMQPushConsumer replier = new DefaultMQPushConsumer(o.opt("group", "java-replier"), hook(o),
            new AllocateMessageQueueAveragely());
        configure(replier, o, "replier");
        replier.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        replier.subscribe(o.get("topic"), "*");
        replier.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt msg : msgs) {
                try {
                    byte[] body = ("reply:" + msg.getUserProperty("seq")).getBytes(StandardCharsets.UTF_8);
                    Message reply = MessageUtil.createReplyMessage(msg, body);
                    reply.putUserProperty("seq", msg.getUserProperty("seq"));
                    replyProducer.send(reply);
                } catch (Exception e) {
                    emit(obj("event", "reply_error", "error", String.valueOf(e)));
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        replier.start();
        DefaultMQProducer requester = producer(o.with("instance", "requester").with("group", "java-requester"));
        int start = o.num("start", 0);
        for (int seq = start; seq < start + o.num("count", 3); seq++) {
            Message reply = requester.request(messageFor(o, seq), o.num("request-timeout-ms", 15_000));
            emit(obj("event", "reply", "seq", seq, "body", new String(reply.getBody(), StandardCharsets.UTF_8),
                "reply_seq", reply.getUserProperty("seq"), "topic", reply.getTopic()));
        }
        shutdownBehind(requester::shutdown);
        shutdownBehind(replier::shutdown);
        shutdownBehind(replyProducer::shutdown);
    }

    static void queryKey(Opts o) throws Exception {
        // What mqadmin queryMsgByKey does, for topics no consumer may read (a DLQ is write-only).
        org.apache.rocketmq.tools.admin.DefaultMQAdminExt admin = o.has("access-key")
            ? new org.apache.rocketmq.tools.admin.DefaultMQAdminExt(hook(o))
            : new org.apache.rocketmq.tools.admin.DefaultMQAdminExt();
        configure(admin, o, "admin-" + ProcessHandle.current().pid());
        admin.start();
        try {
            int start = o.num("start", 0);
            for (int seq = start; seq < start + o.num("count", 1); seq++) {
                String key = "key-" + seq;
                List<MessageExt> found = admin.queryMessage(o.get("topic"), key, 32, 0, Long.MAX_VALUE).getMessageList();
                for (MessageExt msg : found) {
                    if (java.util.Arrays.asList(msg.getKeys().split(" ")).contains(key)) {
                        emit(received(msg, "query"));
                    }
                }
            }
        } finally {
            shutdownBehind(admin::shutdown);
        }
    }

    // ---- output --------------------------------------------------------------------------

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

    static final class Opts {
        private final Map<String, String> values;

        Opts(Map<String, String> values) {
            this.values = values;
        }

        String get(String key) {
            String value = values.get(key);
            if (value == null) {
                throw new IllegalArgumentException("missing --" + key + " for step " + values.get("step"));
            }
            return value;
        }

        String opt(String key, String fallback) {
            return values.getOrDefault(key, fallback);
        }

        boolean has(String key) {
            return values.containsKey(key);
        }

        int num(String key, int fallback) {
            return values.containsKey(key) ? Integer.parseInt(values.get(key)) : fallback;
        }

        Opts with(String key, String value) {
            Map<String, String> copy = new HashMap<>(values);
            copy.put(key, value);
            return new Opts(copy);
        }
    }
}
