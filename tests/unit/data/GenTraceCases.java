import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;

import org.apache.rocketmq.client.AccessChannel;
import org.apache.rocketmq.client.trace.TraceBean;
import org.apache.rocketmq.client.trace.TraceContext;
import org.apache.rocketmq.client.trace.TraceDataEncoder;
import org.apache.rocketmq.client.trace.TraceTransferBean;
import org.apache.rocketmq.client.trace.TraceType;
import org.apache.rocketmq.common.message.MessageType;

/**
 * Golden trace records from the 4.9.8 TraceDataEncoder (see README.md). Usage: java GenTraceCases N.
 * Each line: the context given to encoderFromContextBean, the text it wrote, its transfer keys, the KEYS of a
 * trace message carrying it alone and of one carrying it after the previous case (AsyncDataSendTask's set),
 * and what decoderFromTraceDataString reads back.
 */
public class GenTraceCases {
    static final Random R = new Random(4980);
    static final String[] WORDS = {"order", "o-1", "user42", "K", "订单", "pay", "a_b", "zz", "id:7", "x"};

    public static void main(String[] args) {
        int n = Integer.parseInt(args[0]);
        List<String> previousKeys = new ArrayList<String>();
        for (int i = 0; i < n; i++) {
            TraceType type = TraceType.values()[i % 3];
            TraceContext ctx = randomContext(type, i);
            TraceTransferBean t = TraceDataEncoder.encoderFromContextBean(ctx);
            Set<String> alone = new HashSet<String>(t.getTransKey());
            Set<String> batch = new HashSet<String>();
            batch.addAll(previousKeys);
            batch.addAll(t.getTransKey());
            StringBuilder sb = new StringBuilder("{");
            sb.append("\"type\":").append(q(type.name()));
            sb.append(",\"channel\":").append(q(ctx.getAccessChannel() == null ? "LOCAL" : ctx.getAccessChannel().name()));
            sb.append(",\"timestamp\":").append(ctx.getTimeStamp());
            sb.append(",\"region_id\":").append(q(ctx.getRegionId()));
            sb.append(",\"group\":").append(q(ctx.getGroupName()));
            sb.append(",\"request_id\":").append(q(ctx.getRequestId()));
            sb.append(",\"cost_time\":").append(ctx.getCostTime());
            sb.append(",\"success\":").append(ctx.isSuccess());
            sb.append(",\"context_code\":").append(ctx.getContextCode());
            sb.append(",\"beans\":[");
            for (int b = 0; b < ctx.getTraceBeans().size(); b++) {
                sb.append(b == 0 ? "" : ",").append(bean(ctx.getTraceBeans().get(b)));
            }
            sb.append("],\"data\":").append(q(t.getTransData()));
            sb.append(",\"trans_keys\":").append(list(new ArrayList<String>(t.getTransKey())));
            sb.append(",\"keys_alone\":").append(q(String.join(" ", alone)));
            sb.append(",\"previous_keys\":").append(list(previousKeys));
            sb.append(",\"keys_after_previous\":").append(q(String.join(" ", batch)));
            sb.append(",\"decoded\":[");
            List<TraceContext> decoded = TraceDataEncoder.decoderFromTraceDataString(t.getTransData());
            for (int d = 0; d < decoded.size(); d++) {
                TraceContext c = decoded.get(d);
                sb.append(d == 0 ? "" : ",").append("{\"type\":").append(q(c.getTraceType().name()));
                sb.append(",\"timestamp\":").append(type == TraceType.SubAfter && ctx.getAccessChannel() == AccessChannel.CLOUD ? "null" : String.valueOf(c.getTimeStamp()));
                sb.append(",\"region_id\":").append(q(c.getRegionId()));
                sb.append(",\"group\":").append(q(c.getGroupName()));
                sb.append(",\"request_id\":").append(q(type == TraceType.Pub ? null : c.getRequestId()));
                sb.append(",\"cost_time\":").append(c.getCostTime());
                sb.append(",\"success\":").append(c.isSuccess());
                sb.append(",\"context_code\":").append(c.getContextCode());
                sb.append(",\"bean\":").append(bean(c.getTraceBeans().get(0))).append("}");
            }
            sb.append("]}");
            System.out.println(sb);
            previousKeys = new ArrayList<String>(t.getTransKey());
        }
    }

    static TraceContext randomContext(TraceType type, int i) {
        TraceContext ctx = new TraceContext();
        ctx.setTraceType(type);
        ctx.setTimeStamp(1700000000000L + R.nextInt(1 << 30));
        ctx.setRegionId(R.nextInt(5) == 0 ? null : (R.nextBoolean() ? "DefaultRegion" : "cn-hz"));
        ctx.setGroupName(R.nextBoolean() ? "GID_orders" : "PG-" + i);
        ctx.setRequestId(hex(32));
        ctx.setCostTime(R.nextInt(5000));
        ctx.setSuccess(R.nextInt(4) != 0);
        ctx.setContextCode(R.nextInt(5));
        if (type == TraceType.SubAfter && R.nextInt(4) == 0) {
            ctx.setAccessChannel(AccessChannel.CLOUD);
        } else {
            ctx.setAccessChannel(AccessChannel.LOCAL);
        }
        // CLOUD SubAfter records have no end separator: Java decodes only a lone one
        int beans = type == TraceType.Pub || ctx.getAccessChannel() == AccessChannel.CLOUD ? 1 : 1 + R.nextInt(3);
        List<TraceBean> list = new ArrayList<TraceBean>();
        for (int b = 0; b < beans; b++) {
            TraceBean bean = new TraceBean();
            bean.setTopic(R.nextBoolean() ? "Orders" : "T" + i);
            bean.setMsgId(hex(32));
            bean.setOffsetMsgId(R.nextInt(4) == 0 ? null : hex(32));
            bean.setTags(R.nextInt(3) == 0 ? null : WORDS[R.nextInt(WORDS.length)]);
            String keys = keys();
            // a SubBefore ending in an empty key field does not decode in Java (its split drops it); the hook
            // never writes one: a message without keys gives null
            bean.setKeys(type == TraceType.SubBefore && "".equals(keys) ? null : keys);
            bean.setStoreHost(R.nextInt(4) == 0 ? null : "10.1.2." + R.nextInt(255) + ":10911");
            bean.setBodyLength(R.nextInt(100000));
            bean.setRetryTimes(R.nextInt(17));
            bean.setMsgType(MessageType.values()[R.nextInt(4)]);
            list.add(bean);
        }
        ctx.setTraceBeans(list);
        return ctx;
    }

    static String keys() {
        int n = R.nextInt(5);
        if (n == 0) {
            return null;
        }
        if (n == 1) {
            return "";
        }
        List<String> k = new ArrayList<String>();
        for (int i = 0; i < n - 1; i++) {
            k.add(WORDS[R.nextInt(WORDS.length)] + (R.nextBoolean() ? "" : String.valueOf(R.nextInt(100))));
        }
        return String.join(" ", k);
    }

    static String hex(int n) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < n; i++) {
            sb.append("0123456789ABCDEF".charAt(R.nextInt(16)));
        }
        return sb.toString();
    }

    static String bean(TraceBean b) {
        return "{\"topic\":" + q(b.getTopic()) + ",\"msg_id\":" + q(b.getMsgId()) + ",\"offset_msg_id\":" + q(b.getOffsetMsgId())
            + ",\"tags\":" + q(b.getTags()) + ",\"keys\":" + q(b.getKeys()) + ",\"store_host\":" + q(b.getStoreHost())
            + ",\"body_length\":" + b.getBodyLength() + ",\"retry_times\":" + b.getRetryTimes()
            + ",\"msg_type\":" + (b.getMsgType() == null ? "null" : String.valueOf(b.getMsgType().ordinal())) + "}";
    }

    static String list(List<String> items) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < items.size(); i++) {
            sb.append(i == 0 ? "" : ",").append(q(items.get(i)));
        }
        return sb.append("]").toString();
    }

    static String q(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20 || c > 0x7e) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.append("\"").toString();
    }
}
