package orbitmq.interop;

import java.util.ArrayList;
import java.util.List;

import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * Runs Apache's mqadmin (rocketmq-tools' MQAdminStartup) once per command in one JVM, the
 * commands separated by "+": {@code MqadminBatch clusterList -n ADDR + topicList -n ADDR}.
 * Before each command's output it prints a line {@code ===MQADMIN <index> <verb>}; standard
 * error goes to standard output so each command's stack traces stay under its own marker.
 * One JVM for twenty commands instead of twenty: each start costs seconds.
 */
public final class MqadminBatch {
    private MqadminBatch() {
    }

    public static void main(String[] argv) {
        System.setErr(System.out);
        List<List<String>> commands = new ArrayList<>();
        List<String> current = new ArrayList<>();
        for (String arg : argv) {
            if (arg.equals("+")) {
                commands.add(current);
                current = new ArrayList<>();
            } else {
                current.add(arg);
            }
        }
        commands.add(current);
        for (int i = 0; i < commands.size(); i++) {
            List<String> command = commands.get(i);
            System.out.println();  // 4.9.x verbs may end without a newline
            System.out.println("===MQADMIN " + i + " " + command.get(0));
            System.out.flush();
            try {
                MQAdminStartup.main0(command.toArray(new String[0]), null);
            } catch (Throwable e) {
                e.printStackTrace(System.out);
            }
            System.out.flush();
        }
        System.out.println();
        System.out.println("===MQADMIN END " + commands.size());
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }
}
