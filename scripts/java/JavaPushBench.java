// JavaPushBench: the Java DefaultMQPushConsumer (Apache RocketMQ 4.9.8 client) as the peer rmqrun is measured against.
//
// Why it exists: rmqrun claims to be a drop-in for the Java push consumer, so its throughput and CPU per message
// are only meaningful beside the Java client's on the same broker, the same backlog and the same machine
// (issue #38). scripts/bench_java.py compiles this file at run time against DEST/bin/classpath and drives it.
//
// What it does: one push consumer on a fresh group from the first offset, with the client's defaults (20 consume
// threads, pullBatchSize 32, consumeMessageBatchMaxSize 1) so the peer is what a Java user gets; a concurrent or
// an orderly listener that does nothing or burns --cpu-ms of this thread's CPU time per message (the same thread
// CPU clock the Python handler workers/cpu.py spins on). Every --interval seconds (default 0.1) it prints
//     <unix seconds> <messages consumed> <process CPU seconds>
// on stdout; once --count messages were consumed it prints a summary line starting with '#' (msg/s and process
// CPU µs per message over the 10-90 % window of the drain, as rmqrun's bench measures), shuts down and exits 0.
// Exit 2 when --timeout passes first.
//
//   javac -cp $(DEST/bin/classpath) -d OUT JavaPushBench.java
//   java -cp $(DEST/bin/classpath):OUT JavaPushBench --namesrv 127.0.0.1:19876 --group G --topic T --count 100000
//        [--cpu-ms 1] [--orderly] [--timeout 600] [--warmup N] [--interval 0.1]
// --warmup N: first drain N messages of the topic with a no-op listener on the group <G>_warmup in the same JVM
// (unreported), so the measured drain runs on compiled code, as a long-running consumer's does.

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;

public final class JavaPushBench {
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
    private static volatile long sink; // keeps the burn loop's count observable so it is not optimised away

    private JavaPushBench() {
    }

    /** Spin until this thread has used {@code nanos} more CPU time (thread CPU clock, as workers/cpu.py). */
    static void burn(long nanos) {
        long end = THREADS.getCurrentThreadCpuTime() + nanos;
        long n = 0;
        while (THREADS.getCurrentThreadCpuTime() < end) {
            n++;
        }
        sink += n;
    }

    /** This JVM's CPU seconds (user + system, all threads), from the platform MXBean. */
    static double processCpuSeconds() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime() / 1e9;
        }
        return Double.NaN;
    }

    private static String arg(String[] args, String name, String dflt) {
        for (int i = 0; i < args.length - 1; i++) {
            if (args[i].equals(name)) {
                return args[i + 1];
            }
        }
        if (dflt == null) {
            System.err.println("missing " + name);
            System.exit(64);
        }
        return dflt;
    }

    private static boolean flag(String[] args, String name) {
        for (String a : args) {
            if (a.equals(name)) {
                return true;
            }
        }
        return false;
    }

    /** A started push consumer on a fresh group from the first offset, with the client's defaults otherwise. */
    private static DefaultMQPushConsumer start(String namesrv, String group, String topic, boolean orderly,
                                               long burnNanos, String role, LongAdder consumed) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("JavaPushBench-" + ProcessHandle.current().pid() + "-" + role);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        if (orderly) {
            consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                for (int i = 0; i < msgs.size(); i++) {
                    if (burnNanos > 0) {
                        burn(burnNanos);
                    }
                    consumed.increment();
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (int i = 0; i < msgs.size(); i++) {
                    if (burnNanos > 0) {
                        burn(burnNanos);
                    }
                    consumed.increment();
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }
        consumer.start();
        return consumer;
    }

    public static void main(String[] args) throws Exception {
        String namesrv = arg(args, "--namesrv", null);
        String group = arg(args, "--group", null);
        String topic = arg(args, "--topic", null);
        long count = Long.parseLong(arg(args, "--count", null));
        double cpuMs = Double.parseDouble(arg(args, "--cpu-ms", "0"));
        double timeout = Double.parseDouble(arg(args, "--timeout", "600"));
        long warmup = Long.parseLong(arg(args, "--warmup", "0"));
        long intervalMs = Math.max(1L, Math.round(Double.parseDouble(arg(args, "--interval", "0.1")) * 1000));
        boolean orderly = flag(args, "--orderly");
        final long burnNanos = (long) (cpuMs * 1e6);
        long deadline = System.nanoTime() + (long) (timeout * 1e9);

        if (warmup > 0) {
            // A long-running consumer's JVM has compiled its hot paths; a fresh one spends the first seconds of
            // a drain in the JIT. Drain `warmup` messages with a no-op listener of the same kind on a group of
            // its own first, unreported, then measure on compiled code.
            // (its own counter: a listener call still running as it shuts down counts nothing measured)
            LongAdder warmed = new LongAdder();
            DefaultMQPushConsumer warm = start(namesrv, group + "_warmup", topic, orderly, 0, "warmup", warmed);
            while (warmed.sum() < warmup && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            warm.shutdown();
        }
        LongAdder consumed = new LongAdder();
        DefaultMQPushConsumer consumer = start(namesrv, group, topic, orderly, burnNanos, "measured", consumed);

        List<double[]> points = new ArrayList<>(); // {unix s, consumed, cpu s}
        int rc = 0;
        while (true) {
            Thread.sleep(intervalMs);
            double t = System.currentTimeMillis() / 1000.0;
            long c = consumed.sum();
            double cpu = processCpuSeconds();
            points.add(new double[] {t, c, cpu});
            System.out.printf("%.3f %d %.4f%n", t, c, cpu);
            System.out.flush();
            if (c >= count) {
                break;
            }
            if (System.nanoTime() > deadline) {
                rc = 2;
                break;
            }
        }
        summary(points, count);
        consumer.shutdown();
        System.exit(rc);
    }

    /** The '#' line: msg/s and process CPU µs per message between the first samples at >= 10 % and >= 90 %. */
    private static void summary(List<double[]> points, long count) {
        double[] lo = null;
        double[] hi = null;
        for (double[] p : points) {
            if (lo == null && p[1] >= 0.1 * count) {
                lo = p;
            }
            if (hi == null && p[1] >= 0.9 * count) {
                hi = p;
            }
        }
        if (lo == null || hi == null || hi[0] <= lo[0] || hi[1] <= lo[1]) {
            System.out.println("# rate nan cpu_us_per_msg nan");
            return;
        }
        double rate = (hi[1] - lo[1]) / (hi[0] - lo[0]);
        double us = (hi[2] - lo[2]) / (hi[1] - lo[1]) * 1e6;
        System.out.printf("# rate %.1f cpu_us_per_msg %.2f%n", rate, us);
        System.out.flush();
    }
}
