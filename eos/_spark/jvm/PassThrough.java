/*
 * eos's per-input-partition protocol in the JVM, for batches whose rows are written as they are (no
 * Python function per row): the thinnest version, measured before the rest is built. A task's rows are
 * cut into runs per input topic-partition; each run is written by one transactional producer whose
 * transactional.id is (app, topic, partition), whose initTransactions fences every older attempt, and
 * which commits the run's next input offset, stamped as eos stamps it, in the same transaction as the
 * run's outputs. The Python reference is eos/_core (docs/protocol.md, steps 1-7); this mirrors steps
 * 1-3 (fence, committed offset read stable, stamp checked), 5 (rows below it skipped), 6 and 7.
 *
 * Not yet here (the Python path has them): the witnesses' proof (3b), the reset check, 3a, redo on an
 * abortable error (any error fails the task; Spark's retry fences and resumes at the committed offset),
 * output topic/partition/timestamp columns, dead letters, at_least_once.
 */
package eos.spark;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.unsafe.types.UTF8String;

/** A task's rows written exactly once, one stats row per input partition (eos's STATS_DDL order). */
public class PassThrough implements FlatMapFunction<Iterator<InternalRow>, InternalRow>, Serializable {
  private static final long serialVersionUID = 1L;

  /** Producers kept by this JVM between tasks, by transactional.id, each with the stamp it committed. */
  private static final ConcurrentHashMap<String, Kept> KEPT = new ConcurrentHashMap<>();

  /** The consumers that read committed offsets, one per settings (the group's), kept by this JVM. */
  private static final ConcurrentHashMap<String, KafkaConsumer<byte[], byte[]>> CONSUMERS =
      new ConcurrentHashMap<>();

  private final String spec;
  private transient Spec parsed;

  /** `spec`: JSON from eos/_spark/_jvm_writer.py (app id, output topic, columns, client settings). */
  public PassThrough(String spec) {
    this.spec = spec;
  }

  @Override
  public Iterator<InternalRow> call(Iterator<InternalRow> rows) throws Exception {
    Spec s = spec();
    List<InternalRow> stats = new ArrayList<>();
    java.util.Set<String> done = new java.util.HashSet<>();
    Run run = null;
    while (rows.hasNext()) {
      InternalRow row = rows.next();
      String topic = row.getUTF8String(s.topic).toString();
      int partition = row.getInt(s.partition);
      if (run == null || partition != run.partition || !topic.equals(run.topic)) {
        if (run != null) {
          stats.add(run.finish());
        }
        if (!done.add(topic + ":" + partition)) {
          throw new IllegalStateException(
              "eos.errors.InputOrderError: input partition " + topic + "/" + partition
                  + ": its rows reached this task as two runs");
        }
        run = new Run(s, topic, partition);
        run.start();
      }
      run.write(row);
    }
    if (run != null) {
      stats.add(run.finish());
    }
    return stats.iterator();
  }

  private Spec spec() throws Exception {
    if (parsed == null) {
      parsed = new Spec(new ObjectMapper().readValue(spec, Map.class));
    }
    return parsed;
  }

  /** What every run of the batch shares. */
  static final class Spec {
    final String appId;
    final String outputTopic;
    final long batchId;
    final long commitEvery;
    final int key;
    final int value;
    final int headers;
    final int topic;
    final int partition;
    final int offset;
    final boolean keyIsString;
    final boolean valueIsString;
    final boolean acceptForeign;
    final long timeoutMs;
    final Map<String, Object> producer = new HashMap<>();
    final Map<String, Object> consumer = new HashMap<>();

    @SuppressWarnings("unchecked")
    Spec(Map<String, Object> json) {
      appId = (String) json.get("app_id");
      outputTopic = (String) json.get("output_topic");
      batchId = ((Number) json.get("batch_id")).longValue();
      commitEvery = ((Number) json.get("commit_every")).longValue();
      Map<String, Object> columns = (Map<String, Object>) json.get("columns");
      key = index(columns, "key");
      value = index(columns, "value");
      headers = index(columns, "headers");
      topic = index(columns, "topic");
      partition = index(columns, "partition");
      offset = index(columns, "offset");
      keyIsString = Boolean.TRUE.equals(json.get("key_is_string"));
      valueIsString = Boolean.TRUE.equals(json.get("value_is_string"));
      acceptForeign = Boolean.TRUE.equals(json.get("accept_foreign_offsets"));
      timeoutMs = ((Number) json.get("operation_timeout_ms")).longValue();
      Map<String, Object> client = (Map<String, Object>) json.get("client");
      producer.putAll(client);
      producer.putAll((Map<String, Object>) json.get("producer"));
      producer.put("key.serializer", ByteArraySerializer.class.getName());
      producer.put("value.serializer", ByteArraySerializer.class.getName());
      consumer.putAll(client);
      consumer.put("group.id", appId);
      consumer.put("isolation.level", "read_committed");
      consumer.put("enable.auto.commit", "false");
      consumer.put("key.deserializer", ByteArrayDeserializer.class.getName());
      consumer.put("value.deserializer", ByteArrayDeserializer.class.getName());
    }

    private static int index(Map<String, Object> columns, String name) {
      Object at = columns.get(name);
      return at == null ? -1 : ((Number) at).intValue();
    }
  }

  /** A kept producer and the stamp of its last commit. */
  static final class Kept {
    final KafkaProducer<byte[], byte[]> producer;
    final String stamp;

    Kept(KafkaProducer<byte[], byte[]> producer, String stamp) {
      this.producer = producer;
      this.stamp = stamp;
    }
  }

  /** One input partition's rows of this task: steps 1-7. */
  static final class Run {
    final Spec s;
    final String topic;
    final int partition;
    final TopicPartition tp;
    final String tid;
    final long t0 = System.nanoTime();
    KafkaProducer<byte[], byte[]> producer;
    boolean open;
    Long committed;
    Long committedBefore;
    long firstOffset = -1;
    long lastOffset = -1;
    long recordsIn;
    long skipped;
    long recordsOut;
    long transactions;
    long producersCreated;
    long inTransaction;
    double initSeconds;
    double offsetsSeconds;
    double flushSeconds;
    double sendOffsetsSeconds;
    double endSeconds;
    double commitMax;
    double commitTotal;
    double startSeconds;
    final TreeMap<Integer, Long> witnesses = new TreeMap<>();
    final AtomicReference<Exception> failed = new AtomicReference<>();

    Run(Spec s, String topic, int partition) {
      this.s = s;
      this.topic = topic;
      this.partition = partition;
      this.tp = new TopicPartition(topic, partition);
      this.tid = s.appId + ":" + topic + ":" + partition;
    }

    /** Steps 1-3: a producer that has fenced every older one, and the committed offset read after it. */
    void start() {
      Kept kept = KEPT.remove(tid);
      if (kept == null) {
        producer = fresh();
      } else {
        producer = kept.producer;
      }
      long t = System.nanoTime();
      OffsetAndMetadata found = committedOffset();
      offsetsSeconds = (System.nanoTime() - t) / 1e9;
      String metadata = found == null ? null : found.metadata();
      if (kept != null && (metadata == null || !metadata.equals(kept.stamp))) {
        // another attempt committed since this producer's last commit: it may be fenced; start afresh
        kept.producer.close(Duration.ZERO);
        producer = fresh();
        t = System.nanoTime();
        found = committedOffset();
        offsetsSeconds += (System.nanoTime() - t) / 1e9;
        metadata = found == null ? null : found.metadata();
      }
      if (found != null && !s.acceptForeign && !Stamp.isOwn(s.appId, s.outputTopic, metadata)) {
        producer.close(Duration.ZERO);
        throw new IllegalStateException(
            "eos.errors.ForeignOffsetError: input partition " + topic + "/" + partition
                + ": offset " + found.offset() + " committed for group '" + s.appId
                + "' was not committed by this app (metadata " + metadata + ")");
      }
      committed = found == null ? null : found.offset();
      committedBefore = committed;
      startSeconds = (System.nanoTime() - t0) / 1e9;
    }

    private KafkaProducer<byte[], byte[]> fresh() {
      Properties props = new Properties();
      props.putAll(s.producer);
      props.put("transactional.id", tid);
      KafkaProducer<byte[], byte[]> made = new KafkaProducer<>(props);
      long t = System.nanoTime();
      made.initTransactions();
      initSeconds += (System.nanoTime() - t) / 1e9;
      producersCreated++;
      return made;
    }

    private OffsetAndMetadata committedOffset() {
      KafkaConsumer<byte[], byte[]> consumer = CONSUMERS.computeIfAbsent(s.consumer.toString(), k -> {
        Properties props = new Properties();
        props.putAll(s.consumer);
        return new KafkaConsumer<>(props);
      });
      synchronized (consumer) { // one thread at a time: a KafkaConsumer is not thread-safe
        // the classic consumer asks for stable offsets (KIP-447): it waits out a pending commit
        Map<TopicPartition, OffsetAndMetadata> got =
            consumer.committed(Collections.singleton(tp), Duration.ofMillis(s.timeoutMs));
        return got.get(tp);
      }
    }

    /** Steps 5-7 for one row. */
    void write(InternalRow row) {
      long offset = row.getLong(s.offset);
      recordsIn++;
      if (committed != null && offset < committed) {
        skipped++;
        return;
      }
      if (firstOffset < 0) {
        firstOffset = offset;
      }
      if (!open) {
        producer.beginTransaction();
        open = true;
      }
      byte[] key = s.key < 0 || row.isNullAt(s.key) ? null : bytes(row, s.key, s.keyIsString);
      byte[] value = row.isNullAt(s.value) ? null : bytes(row, s.value, s.valueIsString);
      RecordHeaders headers = null;
      if (s.headers >= 0 && !row.isNullAt(s.headers)) {
        ArrayData array = row.getArray(s.headers);
        headers = new RecordHeaders();
        for (int i = 0; i < array.numElements(); i++) {
          InternalRow header = array.getStruct(i, 2);
          headers.add(
              new RecordHeader(
                  header.getUTF8String(0).toString(), header.isNullAt(1) ? null : header.getBinary(1)));
        }
      }
      producer.send(
          new ProducerRecord<>(s.outputTopic, null, null, key, value, headers),
          (metadata, exc) -> {
            if (exc != null) {
              failed.compareAndSet(null, exc);
            } else {
              synchronized (witnesses) {
                witnesses.merge(metadata.partition(), metadata.offset(), Math::max);
              }
            }
          });
      recordsOut++;
      inTransaction++;
      lastOffset = offset;
      if (inTransaction >= s.commitEvery) {
        commit();
      }
    }

    private static byte[] bytes(InternalRow row, int i, boolean string) {
      return string ? row.getUTF8String(i).getBytes() : row.getBinary(i);
    }

    /** Step 7: outputs delivered, the next input offset stamped and sent, the transaction committed. */
    void commit() {
      long t = System.nanoTime();
      producer.flush();
      flushSeconds += (System.nanoTime() - t) / 1e9;
      Exception exc = failed.get();
      if (exc != null) {
        throw new IllegalStateException(
            "eos.errors.ProduceError: producing to '" + s.outputTopic + "' for input partition "
                + topic + "/" + partition + ": " + exc,
            exc);
      }
      Map<TopicPartition, Long> seen = new HashMap<>();
      synchronized (witnesses) {
        for (Map.Entry<Integer, Long> w : witnesses.entrySet()) {
          seen.put(new TopicPartition(s.outputTopic, w.getKey()), w.getValue());
        }
        witnesses.clear();
      }
      String stamp = Stamp.of(s.appId, s.outputTopic, committed, seen);
      long next = lastOffset + 1;
      long t1 = System.nanoTime();
      producer.sendOffsetsToTransaction(
          Collections.singletonMap(tp, new OffsetAndMetadata(next, stamp)),
          new ConsumerGroupMetadata(s.appId));
      long t2 = System.nanoTime();
      producer.commitTransaction();
      long t3 = System.nanoTime();
      sendOffsetsSeconds += (t2 - t1) / 1e9;
      endSeconds += (t3 - t2) / 1e9;
      double seconds = (t3 - t) / 1e9;
      commitMax = Math.max(commitMax, seconds);
      commitTotal += seconds;
      open = false;
      transactions++;
      inTransaction = 0;
      committed = next;
      lastStamp = stamp;
    }

    String lastStamp;

    /** The last transaction committed, the producer kept; the stats row. */
    InternalRow finish() {
      if (open) {
        commit();
      }
      if (lastStamp != null) {
        Kept old = KEPT.put(tid, new Kept(producer, lastStamp));
        if (old != null) {
          old.producer.close(Duration.ZERO);
        }
      } else {
        producer.close(Duration.ZERO);
      }
      TaskContext task = TaskContext.get();
      String executor = task == null ? null : task.getLocalProperty("eos.executor");
      Object[] v = new Object[30];
      v[0] = UTF8String.fromString(topic);
      v[1] = partition;
      v[2] = UTF8String.fromString(tid);
      v[3] = recordsIn;
      v[4] = skipped;
      v[5] = recordsOut;
      v[6] = transactions;
      v[7] = 0L; // aborted
      v[8] = 0L; // redos
      v[9] = 0L; // producers_replaced
      v[10] = producersCreated;
      v[11] = commitMax;
      v[12] = commitTotal;
      v[13] = firstOffset < 0 ? null : firstOffset;
      v[14] = lastOffset < 0 ? null : lastOffset;
      v[15] = committedBefore;
      v[16] = 0L; // restored
      v[17] = 0L; // snapshots_restored
      v[18] = 0L; // snapshots_taken
      v[19] = 0L; // dead_letters
      v[20] = executor == null ? null : UTF8String.fromString(executor);
      v[21] = null; // placed
      v[22] = (System.nanoTime() - t0) / 1e9;
      v[23] = startSeconds;
      v[24] = initSeconds;
      v[25] = offsetsSeconds;
      v[26] = 0.0; // check_seconds
      v[27] = flushSeconds;
      v[28] = sendOffsetsSeconds;
      v[29] = endSeconds;
      return new GenericInternalRow(v);
    }
  }

  /** eos's offset stamp (eos/_kafka/_offsets.py, _witness.py), written and read as the Python path does. */
  static final class Stamp {
    static final String VERSION = "eos/1";
    static final int METADATA_LIMIT = 4000;
    static final int BUDGET = 3000;

    static String of(String appId, String out, Long since, Map<TopicPartition, Long> witnesses) {
      StringBuilder own = new StringBuilder(VERSION).append(";app=").append(appId).append(";out=").append(out);
      if (since != null) {
        own.append(";since=").append(since);
      }
      if (!witnesses.isEmpty()) {
        int room = METADATA_LIMIT - own.length() - ";w=;unwitnessed=000000".length();
        int budget = Math.max(0, Math.min(BUDGET, room));
        TreeMap<String, TreeMap<Integer, Long>> byTopic = new TreeMap<>();
        for (Map.Entry<TopicPartition, Long> w : witnesses.entrySet()) {
          byTopic.computeIfAbsent(w.getKey().topic(), k -> new TreeMap<>())
              .put(w.getKey().partition(), w.getValue());
        }
        List<String> parts = new ArrayList<>();
        int size = 0;
        int leftOut = 0;
        for (Map.Entry<String, TreeMap<Integer, Long>> entry : byTopic.entrySet()) {
          List<String> kept = new ArrayList<>();
          for (Map.Entry<Integer, Long> p : entry.getValue().entrySet()) {
            String item = p.getKey() + "@" + p.getValue();
            int extra = item.length() + 1 + (kept.isEmpty() ? entry.getKey().length() + 2 : 0);
            if (size + extra > budget) {
              leftOut++;
              continue;
            }
            kept.add(item);
            size += extra;
          }
          if (!kept.isEmpty()) {
            parts.add(entry.getKey() + ":" + String.join("+", kept));
          }
        }
        own.append(";w=").append(String.join("|", parts));
        if (leftOut > 0) {
          own.append(";unwitnessed=").append(leftOut);
        }
      }
      return own.toString();
    }

    static Map<String, String> fields(String metadata) {
      // confluent-kafka (the Python path) commits metadata with its C string's NUL terminator
      while (metadata != null && metadata.endsWith("\0")) {
        metadata = metadata.substring(0, metadata.length() - 1);
      }
      if (metadata == null || !metadata.startsWith(VERSION + ";")) {
        return null;
      }
      Map<String, String> found = new HashMap<>();
      String[] parts = metadata.split(";", -1);
      for (int i = 1; i < parts.length; i++) {
        int eq = parts[i].indexOf('=');
        if (eq >= 0) {
          found.put(parts[i].substring(0, eq), parts[i].substring(eq + 1));
        }
      }
      return found;
    }

    static boolean isOwn(String appId, String out, String metadata) {
      Map<String, String> found = fields(metadata);
      if (found == null || !appId.equals(found.get("app"))) {
        return false;
      }
      return "cli".equals(found.get("by")) || out.equals(found.get("out"));
    }
  }
}
