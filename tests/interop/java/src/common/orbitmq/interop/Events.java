package orbitmq.interop;

import java.util.Map;

/**
 * What every Java driver shares, with no RocketMQ class in it (each client line compiles it):
 * the messages of tests/interop/messages.py and the JSON lines the tests read.
 */
final class Events {
    private Events() {
    }

    static byte[] bodyFor(int seq, int size) {
        byte[] body = new byte[size];
        for (int i = 0; i < size; i++) {
            body[i] = (byte) (((seq * 7 + i) % 255) + 1);
        }
        return body;
    }

    static int sizeFor(int seq, int size) {
        return size > 0 ? size : 1 + (seq * 37) % 300;
    }

    static String tagFor(int seq, String tags) {
        if (tags == null || tags.isEmpty()) {
            return null;
        }
        if (tags.equals("cycle")) {
            return "Tag" + (char) ('A' + seq % 3);
        }
        return tags;
    }

    static String json(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof Number || value instanceof Boolean) {
            return value.toString();
        }
        if (value instanceof Map) {
            StringBuilder sb = new StringBuilder("{");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                if (sb.length() > 1) {
                    sb.append(',');
                }
                sb.append(json(String.valueOf(e.getKey()))).append(':').append(json(e.getValue()));
            }
            return sb.append('}').toString();
        }
        String s = value.toString();
        StringBuilder sb = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20 || c > 0x7e) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.append('"').toString();
    }

    static String hex(byte[] bytes) {
        StringBuilder sb = new StringBuilder(bytes.length * 2);
        for (byte b : bytes) {
            sb.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
        }
        return sb.toString();
    }

    static String stack(Throwable e) {
        java.io.StringWriter out = new java.io.StringWriter();
        e.printStackTrace(new java.io.PrintWriter(out));
        String text = out.toString();
        return text.length() > 3000 ? text.substring(0, 3000) : text;
    }
}
