/*
 * Reads by assignment that commit nothing, for the JVM writer's checks before it skips input: a committed
 * transaction's witnesses read back (step 3b; eos/_kafka/_witness.py) and a readable input record between
 * the committed offset and where the batch resumes (the reset check; eos/_kafka/_reads.py).
 */
package eos.spark;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.TimeoutException;

/** The reads the writer makes before it trusts a committed offset. */
final class Reads {
  private Reads() {}

  /** What reading a transaction's witnesses back found: aborted (the commit is lost there), gone
   * (retention, compaction), unverified (no READ permission). Each entry [topic, partition, offset]. */
  static final class Verdict {
    final List<Object[]> aborted = new ArrayList<>();
    final List<Object[]> gone = new ArrayList<>();
    final List<Object[]> unverified = new ArrayList<>();
  }

  static KafkaConsumer<byte[], byte[]> consumer(Spec s, boolean committed) {
    Properties props = new Properties();
    props.putAll(s.client);
    props.put("group.id", s.restoreGroup);
    props.put("enable.auto.commit", "false");
    props.put("auto.offset.reset", "none");
    props.put("isolation.level", committed ? "read_committed" : "read_uncommitted");
    props.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
    props.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
    return new KafkaConsumer<>(props);
  }

  /** Each witness read back: read_committed, then read_uncommitted for those not seen so. A witness whose
   * partition has a transaction still undecided below it is waited for, then a timeout. */
  static Verdict invisible(Spec s, Map<TopicPartition, Long> witnesses) {
    Verdict verdict = new Verdict();
    Duration timeout = Duration.ofMillis(s.timeoutMs);
    try (KafkaConsumer<byte[], byte[]> committed = consumer(s, true);
        KafkaConsumer<byte[], byte[]> uncommitted = consumer(s, false)) {
      Map<TopicPartition, Long> present = new TreeMap<>(Reads::compare);
      for (Map.Entry<TopicPartition, Long> w : witnessesSorted(witnesses).entrySet()) {
        TopicPartition tp = w.getKey();
        long offset = w.getValue();
        long low;
        long high;
        try {
          low = uncommitted.beginningOffsets(singleton(tp), timeout).get(tp);
          high = uncommitted.endOffsets(singleton(tp), timeout).get(tp);
        } catch (AuthorizationException denied) {
          verdict.unverified.add(entry(tp, offset));
          continue;
        }
        if (low <= offset && offset < high) {
          present.put(tp, offset);
        } else {
          verdict.gone.add(entry(tp, offset));
        }
      }
      long until = System.currentTimeMillis() + Math.max(s.timeoutMs, s.transactionTimeoutMs) + 10_000;
      for (Map.Entry<TopicPartition, Long> w : present.entrySet()) { // decided: the stable end past it
        while (committed.endOffsets(singleton(w.getKey()), timeout).get(w.getKey()) <= w.getValue()) {
          if (System.currentTimeMillis() > until) {
            throw new TimeoutException(
                "reading back the witnesses of a committed transaction: " + w.getKey()
                    + " has a transaction still open at offset " + w.getValue());
          }
          sleep(50);
        }
      }
      Map<TopicPartition, Long> seen = firstAtOrAfter(committed, present, timeout);
      Map<TopicPartition, Long> unseen = new TreeMap<>(Reads::compare);
      for (Map.Entry<TopicPartition, Long> w : present.entrySet()) {
        if (!w.getValue().equals(seen.get(w.getKey()))) {
          unseen.put(w.getKey(), w.getValue());
        }
      }
      Map<TopicPartition, Long> there = firstAtOrAfter(uncommitted, unseen, timeout);
      for (Map.Entry<TopicPartition, Long> w : unseen.entrySet()) {
        (w.getValue().equals(there.get(w.getKey())) ? verdict.aborted : verdict.gone)
            .add(entry(w.getKey(), w.getValue()));
      }
    }
    return verdict;
  }

  /** The offset of a readable (committed) record of `tp` at or after `committed` and before `first`, or
   * null where there is none. */
  static Long unseenRecord(Spec s, TopicPartition tp, long committed, long first) {
    Duration timeout = Duration.ofMillis(s.timeoutMs);
    try (KafkaConsumer<byte[], byte[]> consumer = consumer(s, true)) {
      long low = consumer.beginningOffsets(singleton(tp), timeout).get(tp);
      long stableEnd = consumer.endOffsets(singleton(tp), timeout).get(tp);
      long start = Math.max(committed, low);
      if (start >= Math.min(first, stableEnd)) {
        return null;
      }
      Map<TopicPartition, Long> at = new HashMap<>();
      at.put(tp, start);
      Long found = firstAtOrAfter(consumer, at, timeout).get(tp);
      return found != null && found < first ? found : null;
    }
  }

  /** Per partition, the offset of the first record `consumer` reads at or after the offset given (null:
   * none before the partition's end as the consumer sees it). */
  private static Map<TopicPartition, Long> firstAtOrAfter(
      KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> at, Duration timeout) {
    Map<TopicPartition, Long> out = new HashMap<>();
    if (at.isEmpty()) {
      return out;
    }
    consumer.assign(at.keySet());
    try {
      for (Map.Entry<TopicPartition, Long> w : at.entrySet()) {
        consumer.seek(w.getKey(), w.getValue());
      }
      Map<TopicPartition, Long> ends = consumer.endOffsets(at.keySet(), timeout);
      Set<TopicPartition> waiting = new HashSet<>(at.keySet());
      long deadline = System.currentTimeMillis() + timeout.toMillis();
      while (!waiting.isEmpty()) {
        for (TopicPartition tp : new ArrayList<>(waiting)) {
          if (consumer.position(tp, timeout) >= ends.get(tp)) {
            out.put(tp, null);
            waiting.remove(tp);
          }
        }
        if (waiting.isEmpty()) {
          break;
        }
        if (System.currentTimeMillis() > deadline) {
          throw new TimeoutException("reading " + waiting + ": no answer");
        }
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
          TopicPartition tp = new TopicPartition(r.topic(), r.partition());
          if (waiting.remove(tp)) {
            out.put(tp, r.offset());
          }
        }
      }
    } finally {
      consumer.assign(new ArrayList<TopicPartition>());
    }
    return out;
  }

  private static Map<TopicPartition, Long> witnessesSorted(Map<TopicPartition, Long> witnesses) {
    Map<TopicPartition, Long> sorted = new TreeMap<>(Reads::compare);
    sorted.putAll(witnesses);
    return sorted;
  }

  static int compare(TopicPartition a, TopicPartition b) {
    int byTopic = a.topic().compareTo(b.topic());
    return byTopic != 0 ? byTopic : Integer.compare(a.partition(), b.partition());
  }

  static Object[] entry(TopicPartition tp, long offset) {
    return new Object[] {tp.topic(), tp.partition(), offset};
  }

  private static Set<TopicPartition> singleton(TopicPartition tp) {
    Set<TopicPartition> one = new HashSet<>();
    one.add(tp);
    return one;
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new TimeoutException("interrupted");
    }
  }
}
