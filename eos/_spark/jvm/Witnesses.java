/*
 * The witnesses of a transaction: per output partition, the offset of the last record the transaction
 * wrote there (docs/protocol.md, step 7c). The producer's I/O thread adds one per delivered record, so
 * the common case (the same topic as the record before) costs no lookup, no allocation and no lock.
 */
package eos.spark;

import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.common.TopicPartition;

/** The highest delivered offset per output partition of the open transaction. Written only by its
 * producer's I/O thread (deliveries succeed nowhere else); read and cleared by the task's thread only
 * after a flush or an abort has waited for every delivery, which orders the two threads' accesses. */
final class Witnesses {
  private static final long[] NONE = new long[0];

  /** offsets by partition (-1: none yet) per topic; `topic` and `offsets` are the last record's */
  private final Map<String, long[]> byTopic = new HashMap<>();
  private String topic;
  private long[] offsets = NONE;

  void delivered(String to, int partition, long offset) {
    if (to != topic && !to.equals(topic)) {
      topic = to;
      offsets = byTopic.getOrDefault(to, NONE);
    }
    if (partition >= offsets.length) {
      long[] grown = java.util.Arrays.copyOf(offsets, Math.max(partition + 1, offsets.length * 2));
      java.util.Arrays.fill(grown, offsets.length, grown.length, -1L);
      offsets = grown;
      byTopic.put(to, grown);
    }
    if (offset > offsets[partition]) {
      offsets[partition] = offset;
    }
  }

  /** The witnesses so far, by (topic, partition), and none from now on. */
  Map<TopicPartition, Long> take() {
    Map<TopicPartition, Long> seen = new HashMap<>();
    for (Map.Entry<String, long[]> e : byTopic.entrySet()) {
      long[] o = e.getValue();
      for (int p = 0; p < o.length; p++) {
        if (o[p] >= 0) {
          seen.put(new TopicPartition(e.getKey(), p), o[p]);
        }
      }
    }
    clear();
    return seen;
  }

  void clear() {
    byTopic.clear();
    topic = null;
    offsets = NONE;
  }
}
