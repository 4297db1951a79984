import java.util.*;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.rebalance.*;

public class GenAllocateCases {
    static String q(String s){ return "\"" + s.replace("\\","\\\\").replace("\"","\\\"") + "\""; }
    static String mqJson(MessageQueue m){ return "[" + q(m.getTopic()) + "," + q(m.getBrokerName()) + "," + m.getQueueId() + "]"; }
    public static void main(String[] a) throws Exception {
        Random r = new Random(20240601L);
        StringBuilder out = new StringBuilder();
        String[] idcPool = {"idc1","idc2","idc3"};
        int nCases = Integer.parseInt(a[0]);
        for (int c = 0; c < nCases; c++) {
            int kind = c % 6;
            List<MessageQueue> mqs = new ArrayList<>();
            int nTopics = 1 + r.nextInt(2);
            int nBrokers = 1 + r.nextInt(3);
            for (int t = 0; t < nTopics; t++) for (int b = 0; b < nBrokers; b++) {
                int nq = 1 + r.nextInt(kind == 5 ? 20 : 10);
                String bn = (kind == 4 ? idcPool[r.nextInt(3)] + "@" : "") + "broker-" + (char)('a' + b);
                for (int i = 0; i < nq; i++) mqs.add(new MessageQueue("Topic" + t, bn, i));
            }
            // dedupe like a Set
            mqs = new ArrayList<>(new LinkedHashSet<>(mqs));
            int nc = 1 + r.nextInt(kind == 5 ? 30 : 12);
            List<String> cids = new ArrayList<>();
            for (int i = 0; i < nc; i++) cids.add("10.0." + r.nextInt(4) + "." + r.nextInt(256) + "@" + (1000 + r.nextInt(90000)) + "#" + Math.abs(r.nextLong()));
            if (c % 17 == 3 && cids.size() > 1) cids.add(cids.get(0)); // a duplicated client id
            Collections.sort(mqs);
            Collections.sort(cids);
            String name; AllocateMessageQueueStrategy s; String extra = "";
            switch (kind) {
                case 0: s = new AllocateMessageQueueAveragely(); name = "AVG"; break;
                case 1: s = new AllocateMessageQueueAveragelyByCircle(); name = "AVG_BY_CIRCLE"; break;
                case 2: s = new AllocateMessageQueueConsistentHash(); name = "CONSISTENT_HASH"; extra = ",\"virtual_nodes\":10"; break;
                case 3: { int v = r.nextInt(5); s = new AllocateMessageQueueConsistentHash(v); name = "CONSISTENT_HASH"; extra = ",\"virtual_nodes\":" + v; break; }
                case 4: { Set<String> idcs = new HashSet<>(); for (String i : idcPool) if (r.nextBoolean()) idcs.add(i);
                    AllocateMessageQueueByMachineRoom m = new AllocateMessageQueueByMachineRoom(); m.setConsumeridcs(idcs); s = m; name = "MACHINE_ROOM";
                    StringBuilder e = new StringBuilder(",\"idcs\":["); int k = 0; for (String i : new TreeSet<>(idcs)) { if (k++ > 0) e.append(","); e.append(q(i)); } e.append("]"); extra = e.toString(); break; }
                default: s = new AllocateMessageQueueConsistentHash(); name = "CONSISTENT_HASH"; extra = ",\"virtual_nodes\":10"; break;
            }
            StringBuilder line = new StringBuilder("{\"strategy\":" + q(name) + extra + ",\"mqs\":[");
            for (int i = 0; i < mqs.size(); i++) { if (i > 0) line.append(","); line.append(mqJson(mqs.get(i))); }
            line.append("],\"cids\":[");
            for (int i = 0; i < cids.size(); i++) { if (i > 0) line.append(","); line.append(q(cids.get(i))); }
            line.append("],\"result\":{");
            int k = 0;
            for (String cid : new LinkedHashSet<>(cids)) {
                List<MessageQueue> res = s.allocate("G", cid, mqs, cids);
                if (k++ > 0) line.append(",");
                line.append(q(cid)).append(":[");
                for (int i = 0; i < res.size(); i++) { if (i > 0) line.append(","); line.append(mqs.indexOf(res.get(i))); }
                line.append("]");
            }
            line.append("}}\n");
            out.append(line);
        }
        System.out.print(out);
    }
}
