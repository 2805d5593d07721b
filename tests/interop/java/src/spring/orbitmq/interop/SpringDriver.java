package orbitmq.interop;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.spring.annotation.RocketMQMessageListener;
import org.apache.rocketmq.spring.annotation.RocketMQTransactionListener;
import org.apache.rocketmq.spring.core.RocketMQListener;
import org.apache.rocketmq.spring.core.RocketMQLocalTransactionListener;
import org.apache.rocketmq.spring.core.RocketMQLocalTransactionState;
import org.apache.rocketmq.spring.core.RocketMQTemplate;
import org.apache.rocketmq.spring.support.RocketMQHeaders;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.CommandLineRunner;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.messaging.Message;
import org.springframework.messaging.support.MessageBuilder;
import org.springframework.stereotype.Component;

/**
 * A minimal Spring Boot application on rocketmq-spring-boot-starter, as a user writes one:
 * {@code RocketMQTemplate.syncSend} and {@code sendMessageInTransaction} with a
 * {@code @RocketMQTransactionListener}, and a {@code @RocketMQMessageListener} that receives
 * what was sent. Started by tests/interop/test_spring_boot.py with {@code rocketmq.name-server}
 * and the {@code orbit.*} properties on its command line; prints one JSON line per event
 * (Events.json) and exits once the listener has every message it expects, or at the timeout.
 *
 * Message seq carries what tests/interop/messages.py builds: seq 0..count-1 go by syncSend,
 * seq 1000.. by transaction (seq % 3: 0 commits, 1 rolls back, 2 commits too, except the first
 * {@code orbit.tx-orphans} of them, left UNKNOWN and committed when the broker checks back).
 */
@SpringBootApplication
public class SpringDriver implements CommandLineRunner {
    static final Object OUT = new Object();
    static final int TX_START = 1000;
    static final AtomicInteger RECEIVED = new AtomicInteger();
    static final CountDownLatch ALL_RECEIVED = new CountDownLatch(1);
    static volatile int expected = Integer.MAX_VALUE;
    static volatile int orphans = Integer.MAX_VALUE;

    private final RocketMQTemplate template;

    @Value("${orbit.topic}")
    private String topic;

    @Value("${orbit.count:100}")
    private int count;

    @Value("${orbit.tx-count:30}")
    private int txCount;

    @Value("${orbit.tx-orphans:2147483647}")
    private int txOrphans;

    @Value("${orbit.timeout-s:90}")
    private int timeoutS;

    public SpringDriver(RocketMQTemplate template) {
        this.template = template;
    }

    public static void main(String[] args) {
        int status = 0;
        try {
            SpringApplication.run(SpringDriver.class, args);
        } catch (Throwable e) {
            emit(obj("event", "error", "step", "spring", "error", String.valueOf(e), "trace", Events.stack(e)));
            status = 1;
        }
        System.out.flush();
        Runtime.getRuntime().halt(status);
    }

    static Message<byte[]> messageFor(int seq) {
        return MessageBuilder.withPayload(Events.bodyFor(seq, Events.sizeFor(seq, 0)))
            .setHeader(RocketMQHeaders.KEYS, "key-" + seq + " k" + seq % 3)
            .setHeader("seq", String.valueOf(seq))
            .setHeader("origin", "java-spring")
            .setHeader("uprop", "v\u00e4l\u00fc\u00e9-\u6d88\u606f-" + seq)
            .setHeader("color", seq % 2 == 0 ? "red" : "blue")
            .setHeader("n", String.valueOf(seq % 10))
            .build();
    }

    @Override
    public void run(String... args) throws Exception {
        orphans = txOrphans;
        int commits = 0;
        for (int seq = TX_START; seq < TX_START + txCount; seq++) {
            if (seq % 3 != 1) {
                commits++;
            }
        }
        expected = count + commits;
        for (int seq = 0; seq < count; seq++) {
            SendResult result = template.syncSend(topic + ":" + Events.tagFor(seq, "cycle"), messageFor(seq));
            emit(obj("event", "sent", "seq", seq, "status", result.getSendStatus().name(),
                "msg_id", result.getMsgId(), "queue_id", result.getMessageQueue().getQueueId()));
        }
        for (int seq = TX_START; seq < TX_START + txCount; seq++) {
            SendResult result = template.sendMessageInTransaction(
                topic + ":" + Events.tagFor(seq, "cycle"), messageFor(seq), seq);
            emit(obj("event", "sent", "seq", seq, "status", result.getSendStatus().name(),
                "msg_id", result.getMsgId(), "transaction", result.getTransactionId() != null));
        }
        boolean finished = ALL_RECEIVED.await(timeoutS, TimeUnit.SECONDS);
        emit(obj("event", "consume_done", "finished", finished, "counts", obj("listener", RECEIVED.get())));
    }

    /** The application's consumer: every message of the topic, compared by the test. */
    @Component
    @RocketMQMessageListener(topic = "${orbit.topic}", consumerGroup = "${orbit.group}", selectorExpression = "*")
    public static class Listener implements RocketMQListener<MessageExt> {
        @Override
        public void onMessage(MessageExt msg) {
            Map<String, String> props = new TreeMap<>(msg.getProperties());
            for (String key : MessageConst.STRING_HASH_SET) {
                props.remove(key);
            }
            emit(obj("event", "received", "instance", "listener", "topic", msg.getTopic(),
                "tags", msg.getTags(), "keys", msg.getKeys(), "body_hex", Events.hex(msg.getBody()),
                "msg_id", msg.getMsgId(), "queue_id", msg.getQueueId(), "props", props));
            if (RECEIVED.incrementAndGet() >= expected) {
                ALL_RECEIVED.countDown();
            }
        }
    }

    /** The template's transaction listener: decides by seq, and commits what the broker asks about. */
    @RocketMQTransactionListener
    public static class TransactionListener implements RocketMQLocalTransactionListener {
        @Override
        public RocketMQLocalTransactionState executeLocalTransaction(Message msg, Object arg) {
            int seq = (Integer) arg;
            if (seq % 3 == 0) {
                return RocketMQLocalTransactionState.COMMIT;
            }
            if (seq % 3 == 1) {
                return RocketMQLocalTransactionState.ROLLBACK;
            }
            return (seq - TX_START) / 3 < orphans
                ? RocketMQLocalTransactionState.UNKNOWN : RocketMQLocalTransactionState.COMMIT;
        }

        @Override
        public RocketMQLocalTransactionState checkLocalTransaction(Message msg) {
            Object seq = msg.getHeaders().get("seq");
            emit(obj("event", "checked", "seq", seq == null ? -1 : Integer.parseInt(String.valueOf(seq))));
            return RocketMQLocalTransactionState.COMMIT;
        }
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
