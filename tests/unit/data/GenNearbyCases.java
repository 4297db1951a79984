import java.util.*;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.rebalance.*;

/** Test vectors for MACHINE_ROOM_NEARBY: rooms from "room-..." broker names and "ip@room-..." client ids. */
public class GenNearbyCases {
    static String q(String s){ return "\"" + s.replace("\\","\\\\").replace("\"","\\\"") + "\""; }
    static String mqJson(MessageQueue m){ return "[" + q(m.getTopic()) + "," + q(m.getBrokerName()) + "," + m.getQueueId() + "]"; }

    public static void main(String[] a) throws Exception {
        Random r = new Random(20261129L);
        AllocateMachineRoomNearby.MachineRoomResolver resolver = new AllocateMachineRoomNearby.MachineRoomResolver() {
            public String brokerDeployIn(MessageQueue mq) { return mq.getBrokerName().split("-")[0]; }
            public String consumerDeployIn(String cid) { return cid.split("@")[1].split("-")[0]; }
        };
        String[] wrapped = {"AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH"};
        StringBuilder out = new StringBuilder();
        int nCases = Integer.parseInt(a[0]);
        for (int c = 0; c < nCases; c++) {
            String name = wrapped[c % 3];
            AllocateMessageQueueStrategy inner = name.equals("AVG") ? new AllocateMessageQueueAveragely()
                : name.equals("AVG_BY_CIRCLE") ? new AllocateMessageQueueAveragelyByCircle()
                : new AllocateMessageQueueConsistentHash();
            AllocateMachineRoomNearby s = new AllocateMachineRoomNearby(inner, resolver);
            int brokerRooms = 1 + r.nextInt(4);
            List<MessageQueue> mqs = new ArrayList<>();
            for (int room = 1; room <= brokerRooms; room++) {
                int brokers = 1 + r.nextInt(2);
                for (int b = 0; b < brokers; b++) {
                    int nq = 1 + r.nextInt(c % 5 == 4 ? 24 : 8);
                    for (int i = 0; i < nq; i++) mqs.add(new MessageQueue("T", "room" + room + "-broker-" + (char)('a' + b), i));
                }
            }
            // consumer rooms: a random subset of room1..room(brokerRooms+1), at least one (the extra room has no broker)
            List<String> cids = new ArrayList<>();
            for (int room = 1; room <= brokerRooms + 1; room++) {
                if (cids.isEmpty() && room == brokerRooms + 1 || r.nextInt(3) > 0) {
                    int n = 1 + r.nextInt(c % 7 == 6 ? 12 : 4);
                    for (int i = 0; i < n; i++)
                        cids.add("10.0." + r.nextInt(4) + "." + r.nextInt(256) + "@room" + room + "-" + (1000 + r.nextInt(90000)) + "#" + Math.abs(r.nextLong()));
                }
            }
            if (c % 13 == 5 && cids.size() > 1) cids.add(cids.get(0)); // a duplicated client id
            Collections.sort(mqs);
            Collections.sort(cids);
            StringBuilder line = new StringBuilder("{\"strategy\":\"MACHINE_ROOM_NEARBY\",\"wrapped\":" + q(name) + ",\"mqs\":[");
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
