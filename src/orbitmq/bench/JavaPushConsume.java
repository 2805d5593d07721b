/*
 * Child process of `bench consume --compare-defaults`: Apache RocketMQ's Java
 * DefaultMQPushConsumer with every default a RocketMQ user keeps (pullBatchSize 32,
 * consumeMessageBatchMaxSize 1, 20 consume threads, pullInterval 0, its flow-control
 * thresholds), except where a new group starts: CONSUME_FROM_FIRST_OFFSET, so that it reads
 * the backlog the benchmark stored before it, and the time it waits for a name server or broker
 * answer outside pulls (mqClientApiTimeout 10 s instead of 3 s: on a busy host the route query
 * of start() outlasts 3 s and start() fails). The listener only counts.
 *
 * Arguments: namesrv topic group count timeout_s. When `count` messages have arrived, or after
 * `timeout_s`, one JSON line is printed: {"count": n, "started": t, "first": t, "last": t,
 * "cpu_s": s}: seconds of System.nanoTime() (CLOCK_MONOTONIC on Linux, Python's
 * time.monotonic()), and the CPU seconds this JVM spent until then (start-up included).
 */

import java.lang.management.ManagementFactory;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;

public final class JavaPushConsume {
    private JavaPushConsume() {
    }

    private static double seconds(long nanos) {
        return nanos / 1e9;
    }

    public static void main(String[] args) throws Exception {
        long started = System.nanoTime();
        String namesrv = args[0];
        String topic = args[1];
        String group = args[2];
        int count = Integer.parseInt(args[3]);
        double timeoutS = Double.parseDouble(args[4]);
        AtomicInteger received = new AtomicInteger();
        AtomicLong first = new AtomicLong();
        AtomicLong last = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("bench-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setMqClientApiTimeout(10_000);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            int seen = received.addAndGet(msgs.size());
            long now = System.nanoTime();
            first.compareAndSet(0, now);
            if (seen >= count && last.compareAndSet(0, now)) {
                done.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        boolean finished = done.await((long) (timeoutS * 1000), TimeUnit.MILLISECONDS);
        long lastNanos = finished ? last.get() : System.nanoTime();
        long cpuNanos = ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime();
        System.out.printf(Locale.ROOT, "{\"count\": %d, \"started\": %.6f, \"first\": %.6f, \"last\": %.6f, \"cpu_s\": %.3f}%n",
            Math.min(received.get(), count), seconds(started), seconds(first.get()), seconds(lastNanos),
            seconds(cpuNanos));
        System.out.flush();
        Runtime.getRuntime().halt(0);  // the client's threads outlive shutdown(); nothing is left to commit
    }
}
