/*
 * Steps 1-7 of docs/protocol.md for one input topic-partition of one task, in the JVM: the reference is
 * the Python path's (eos/_core/_incarnation.py, _fence.py, _task.py, _transaction.py), and each step here
 * names the step it mirrors. What a check refuses goes to the driver as a Refusal (its data), where the
 * Python path's own error is raised with its own words.
 */
package eos.spark;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.CorruptRecordException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.InvalidTimestampException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RecordBatchTooLargeException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.spark.TaskContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;

/** One input partition's rows of a task, written exactly once. */
final class InputPartition {
  private static final Logger LOG = LoggerFactory.getLogger("eos.task");
  /** How long a kept producer waits for a stable committed offset before it is replaced (Python: PROBE_S). */
  private static final Duration PROBE = Duration.ofSeconds(1);

  private final Spec s;
  final String topic;
  final int partition;
  private final TopicPartition tp;
  private final String tid;
  private final long t0 = System.nanoTime();
  private KafkaProducer<byte[], byte[]> producer;
  private boolean open;
  /** the JVM's kept producer, trusted by step 2 (not a fresh one) */
  private boolean reused;
  private long opened;
  private Long committed;
  private Long committedBefore;
  private String lastStamp;
  private long firstOffset = -1;
  private long lastOffset = -1;
  private long recordsIn;
  private long skipped;
  private long recordsOut;
  private long transactions;
  private long aborted;
  private long producersCreated;
  private long producersReplaced;
  private long inTransaction;
  private double initSeconds;
  private double offsetsSeconds;
  private double checkSeconds;
  private double flushSeconds;
  private double sendOffsetsSeconds;
  private double endSeconds;
  private double commitMax;
  private double commitTotal;
  private double startSeconds;
  private final Witnesses witnesses = new Witnesses();
  private final java.util.Set<String> checked = new java.util.HashSet<>();
  /** the topic of the record before, checked: most rows go where the one before went */
  private String lastChecked;
  private final AtomicReference<Object[]> failed = new AtomicReference<>();
  // on_error "dead_letter" (exactly_once), as the Python path's (eos/_core/_deadletter.py, _task.py): the
  // open transaction's rows, kept to write them again after an abort; the batch's dead records of this
  // partition by input offset ({message, too large}); each refused output of the open transaction
  private final Spec.DeadLetters letters;
  private final List<Object[]> pending = new ArrayList<>();
  private final Map<Long, Object[]> dead = new HashMap<>();
  private final List<Object[]> refused = Collections.synchronizedList(new ArrayList<>());
  private final java.util.Set<Exception> ownFaults =
      Collections.synchronizedSet(Collections.newSetFromMap(new java.util.IdentityHashMap<>()));
  private volatile Thread sendingThread;
  private long outputsInTransaction;
  private long lettersInTransaction;
  private long deadLetters;

  /** The open transaction holds a record of its own fault: abort it and write its rows again. */
  private static final class Redo extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Redo() {
      super(null, null, false, false);
    }
  }

  InputPartition(Spec s, String topic, int partition) {
    this.s = s;
    this.topic = topic;
    this.partition = partition;
    this.tp = new TopicPartition(topic, partition);
    this.tid = s.appId + ":" + topic + ":" + partition;
    this.letters = s.exactlyOnce ? s.deadLetters : null;
  }

  /** Steps 1-3 (and the reset check), before any row of this partition is skipped or written; `first`:
   * the offset of the task's first row of it. */
  void start(long first) {
    // 1. A producer that has fenced every older incarnation: the JVM's kept one, or a fresh one
    // (at_least_once: the JVM's one producer without transactions, and the committed offset).
    Producers.Kept kept = s.exactlyOnce ? Producers.take(tid) : null;
    OffsetAndMetadata found;
    if (!s.exactlyOnce) {
      producer = Producers.shared(s.producer);
      found = committedOffset(Duration.ofMillis(s.timeoutMs));
    } else if (kept != null) {
      producer = kept.producer;
      reused = true;
      found = committedOffset(PROBE);
      // 2. A kept producer is trusted only where the committed stamp is its own last commit: another
      // incarnation committed since (it may have fenced this one), or the offset is not stable yet.
      if (found == UNSTABLE || found == null || !kept.stamp.equals(Stamp.clean(found.metadata()))) {
        kept.producer.close(Duration.ZERO);
        producersReplaced++;
        reused = false;
        producer = fresh();
        found = committedOffset(Duration.ofMillis(s.timeoutMs));
      }
    } else {
      producer = fresh();
      found = committedOffset(Duration.ofMillis(s.timeoutMs));
    }
    if (found == UNSTABLE) {
      throw new TimeoutException(
          "reading the committed offset of " + tp + ": a transaction holding it is still open after "
              + s.timeoutMs + " ms");
    }
    String metadata = found == null ? null : Stamp.clean(found.metadata());
    // 3. The committed offset is this app's own (or an operator's reset), else nothing is skipped.
    if (found != null && !s.acceptForeign && !Stamp.isOwn(s.appId, s.out, metadata)) {
      throw Refusal.of(
          "ForeignOffsetError", "topic", topic, "partition", partition, "offset", found.offset(),
          "metadata", metadata);
    }
    committed = found == null ? null : found.offset();
    committedBefore = committed;
    // 3b. The transaction that committed it is visible on every partition it wrote to.
    Map<TopicPartition, Long> named = s.exactlyOnce ? Stamp.witnesses(metadata) : new HashMap<>();
    if (!named.isEmpty() && !Producers.isProven(tid, metadata)) {
      long t = System.nanoTime();
      Reads.Verdict verdict = Reads.invisible(s, named);
      checkSeconds += (System.nanoTime() - t) / 1e9;
      if (!verdict.aborted.isEmpty()) {
        throw Refusal.of(
            "CommitLostError", "topic", topic, "partition", partition, "offset", found.offset(),
            "metadata", metadata, "written", named.size(), "lost", verdict.aborted);
      }
      Producers.proven(tid, metadata);
    }
    // The reset check: an operator set the offset back, and this run resumes past it.
    Long resetFrom = Stamp.resetFrom(metadata);
    Long readStart = s.readStart(topic, partition);
    long resumesAt = readStart != null ? readStart : first;
    if (resetFrom != null && committed != null && resumesAt > committed
        && !(0 <= resetFrom && resumesAt < resetFrom)) {
      Long unseen = Reads.unseenRecord(s, tp, committed, resumesAt);
      if (unseen != null) {
        throw Refusal.of(
            "InputGapError", "topic", topic, "partition", partition, "committed", committed,
            "reset_from", resetFrom, "resumes_at", resumesAt, "unseen", unseen);
      }
    }
    startSeconds = (System.nanoTime() - t0) / 1e9;
    Crash.point("before_produce"); // F1
  }

  /** What committedOffset answers where the wait ran out (compared by identity). */
  private static final OffsetAndMetadata UNSTABLE = new OffsetAndMetadata(0L, "not stable");

  private KafkaProducer<byte[], byte[]> fresh() {
    Properties props = new Properties();
    props.putAll(s.producer);
    props.put("transactional.id", tid);
    KafkaProducer<byte[], byte[]> made = new KafkaProducer<>(props);
    long t = System.nanoTime();
    try {
      made.initTransactions();
    } catch (RuntimeException e) {
      made.close(Duration.ZERO);
      for (Throwable c = e; c != null; c = c.getCause()) {
        if (c instanceof AuthorizationException) { // the Python path's words: _translate.missing_acl
          int code = Errors.forException(c).code();
          throw Refusal.of("FatalError", e, "kind", "acl", "code", code, "transactional_id", tid);
        }
      }
      throw e;
    }
    initSeconds += (System.nanoTime() - t) / 1e9;
    producersCreated++;
    return made;
  }

  /** The committed offset read stable (KIP-447: the classic consumer waits out an open transaction
   * holding it), null where none; UNSTABLE where `wait` ran out first. */
  private OffsetAndMetadata committedOffset(Duration wait) {
    long t = System.nanoTime();
    KafkaConsumer<byte[], byte[]> consumer = Producers.consumer(s.consumer);
    try {
      synchronized (consumer) { // a KafkaConsumer is not thread-safe
        return consumer.committed(Collections.singleton(tp), wait).get(tp);
      }
    } catch (TimeoutException e) {
      return UNSTABLE;
    } finally {
      offsetsSeconds += (System.nanoTime() - t) / 1e9;
    }
  }

  /** Steps 5-7 for one row. */
  void write(InternalRow row, long offset) {
    recordsIn++;
    if (committed != null && offset < committed) { // 5. written already: skipped, counted
      skipped++;
      return;
    }
    if (firstOffset < 0) {
      firstOffset = offset;
    }
    if (letters != null) {
      pending.add(new Object[] {row.copy(), offset});
    }
    try {
      emit(row, offset);
    } catch (Redo r) {
      redo();
    }
    if (inTransaction >= s.commitEvery || (System.nanoTime() - opened) / 1_000_000 >= s.commitIntervalMs) {
      commit();
    }
  }

  /** Steps 6-7a for one row: its output (or its dead letter) sent in the transaction, begun at its
   * first record (Kafka Streams' maybeBeginTransaction). */
  private void emit(InternalRow row, long offset) {
    if (letters != null && dead.containsKey(offset)) {
      begin();
      sendLetter(row, offset);
      lettersInTransaction++;
      inTransaction++;
      lastOffset = offset;
      return;
    }
    String to = s.outTopic >= 0 && !row.isNullAt(s.outTopic) ? row.getUTF8String(s.outTopic).toString() : s.outputTopic;
    if (to == null) {
      throw Refusal.of("ProduceError", "kind", "no_topic", "topic", topic, "partition", partition, "offset", offset);
    }
    if (to != lastChecked) { // before the first record to it (eos/_kafka/_collector.py's _check_topic)
      if (!checked.contains(to)) {
        String[] why = Producers.unwritable(s.client, to, s.timeoutMs);
        if (why != null) {
          throw Refusal.of(
              "ProduceError", "kind", "unwritable", "why", why[0], "detail", why[1], "output_topic", to,
              "topic", topic, "partition", partition, "offset", offset);
        }
        checked.add(to);
      }
      lastChecked = to;
    }
    Integer toPartition = null;
    if (s.outPartition >= 0 && !row.isNullAt(s.outPartition)) {
      toPartition = row.getInt(s.outPartition);
    }
    Long timestamp = null;
    if (s.outTimestamp >= 0 && !row.isNullAt(s.outTimestamp)) {
      timestamp =
          "timestamp".equals(s.timestampKind)
              ? Math.floorDiv(row.getLong(s.outTimestamp), 1000L)
              : "int".equals(s.timestampKind) ? (long) row.getInt(s.outTimestamp) : row.getLong(s.outTimestamp);
      if (timestamp < 0) {
        if (letters != null) { // the record's own fault: dead-lettered (a poison record, as in Python)
          refused.add(new Object[] {null, to, offset, letters.before1970(to, timestamp)});
          throw new Redo();
        }
        throw Refusal.of(
            "ProduceError", "kind", "timestamp", "output_topic", to, "timestamp", timestamp, "topic", topic,
            "partition", partition, "offset", offset);
      }
    }
    byte[] key = key(row);
    byte[] value = value(row);
    RecordHeaders headers = inputHeaders(row);
    begin();
    send(new ProducerRecord<>(to, toPartition, timestamp, key, value, headers), to, offset);
    recordsOut++;
    outputsInTransaction++;
    inTransaction++;
    lastOffset = offset;
  }

  private void begin() {
    if (!open) {
      if (s.exactlyOnce) {
        producer.beginTransaction();
      }
      open = true;
      opened = System.nanoTime();
    }
  }

  /** The dead letter of input record `offset`: the row's key, value and headers as they reached the sink,
   * with the headers naming the error (eos/_core/_deadletter.py's DeadLetters.letter, whose names and
   * words the driver hands over); the value left out, its size said, where it was refused as too large. */
  private void sendLetter(InternalRow row, long offset) {
    Object[] found = dead.get(offset);
    Spec.DeadLetters d = letters;
    byte[] key = key(row);
    byte[] value = value(row);
    RecordHeaders headers = inputHeaders(row);
    if (headers == null) {
      headers = new RecordHeaders();
    }
    header(headers, d.exceptionHeader, d.exception);
    header(headers, d.kindHeader, d.kind);
    header(headers, d.messageHeader, (String) found[0]);
    header(headers, d.topicHeader, topic);
    header(headers, d.partitionHeader, String.valueOf(partition));
    header(headers, d.offsetHeader, String.valueOf(offset));
    header(headers, d.appIdHeader, s.appId);
    header(headers, d.batchIdHeader, String.valueOf(s.batchId));
    if (Boolean.TRUE.equals(found[1]) && value != null) {
      header(headers, d.valueBytesHeader, String.valueOf(value.length));
      value = null;
    }
    send(new ProducerRecord<>(d.topic, null, null, key, value, headers), d.topic, offset);
  }

  private static void header(RecordHeaders headers, String name, String value) {
    headers.add(new RecordHeader(name, value.getBytes(java.nio.charset.StandardCharsets.UTF_8)));
  }

  /** The row's Kafka headers column (`headers`), null where it has none or they are empty. */
  private RecordHeaders inputHeaders(InternalRow row) {
    if (s.headers < 0 || row.isNullAt(s.headers)) {
      return null;
    }
    ArrayData array = row.getArray(s.headers);
    if (array.numElements() == 0) {
      return null;
    }
    RecordHeaders headers = new RecordHeaders();
    for (int i = 0; i < array.numElements(); i++) {
      InternalRow header = array.getStruct(i, 2);
      headers.add(
          new RecordHeader(header.getUTF8String(0).toString(), header.isNullAt(1) ? null : header.getBinary(1)));
    }
    return headers;
  }

  /** 8b with dead letters: each record of the open transaction refused for its own fault is dead from
   * now on; the transaction aborted and its rows written again, the dead ones as their dead letters,
   * until a run of them has none refused. Anything else refused fails the task, as without. */
  private void redo() {
    while (true) {
      markDead();
      if (open) {
        producer.abortTransaction();
        aborted++;
      }
      open = false;
      recordsOut -= outputsInTransaction;
      outputsInTransaction = 0;
      lettersInTransaction = 0;
      inTransaction = 0;
      witnesses.clear();
      failed.set(null);
      refused.clear();
      ownFaults.clear();
      try {
        for (Object[] p : pending) {
          emit((InternalRow) p[0], (Long) p[1]);
        }
        return;
      } catch (Redo again) {
        // another record of these rows refused: round again
      }
    }
  }

  private void markDead() {
    List<Object[]> found;
    synchronized (refused) {
      found = new ArrayList<>(refused);
    }
    if (found.isEmpty()) {
      throw refusal(); // refused only with other records of its batch: no record of its own to name
    }
    for (Object[] f : found) {
      Exception exc = (Exception) f[0];
      long offset = (Long) f[2];
      String message = (String) f[3];
      if (exc != null) {
        if (!poison(exc)) {
          failed.set(f);
          throw refusal();
        }
        message = letters.refused((String) f[1], reason(exc));
      }
      if (dead.containsKey(offset)) {
        throw Refusal.of(
            "ProduceError", exc, "kind", "letter_refused", "reason", message, "first", dead.get(offset)[0],
            "topic", topic, "partition", partition, "offset", offset);
      }
      if (dead.size() >= letters.max) {
        throw Refusal.of(
            "TooManyDeadLettersError", exc, "count", dead.size() + 1, "last", message, "topic", topic,
            "partition", partition, "offset", offset);
      }
      dead.put(offset, new Object[] {message, exc != null && tooLarge(exc)});
    }
  }

  /** What the Python path's client says of a refusal like `exc` (the driver's words for Java's). */
  private String reason(Exception exc) {
    String words = letters.words.get(exc.getClass().getSimpleName());
    String message = String.valueOf(exc.getMessage());
    return words == null ? message : words + " (" + message + ")";
  }

  private static boolean tooLarge(Exception exc) {
    return exc instanceof RecordTooLargeException || exc instanceof RecordBatchTooLargeException;
  }

  /** The record's own fault, which no retry mends (the Python path's _translate.is_poison). */
  private static boolean poison(Exception exc) {
    return exc instanceof RecordTooLargeException
        || exc instanceof RecordBatchTooLargeException
        || exc instanceof InvalidRecordException
        || exc instanceof InvalidTimestampException
        || exc instanceof CorruptRecordException;
  }

  private void send(ProducerRecord<byte[], byte[]> record, String out, long offset) {
    try {
      sendingThread = Thread.currentThread();
      producer.send(record, (metadata, exc) -> delivered(metadata, exc, out, offset));
    } catch (KafkaException e) {
      // a delivery of this transaction failed before: the producer refuses every record after it
      if (failed.get() == null) {
        throw e;
      }
      if (letters != null) {
        throw new Redo();
      }
      throw refusal();
    } finally {
      sendingThread = null;
    }
  }

  private void delivered(RecordMetadata metadata, Exception exc, String out, long offset) {
    if (exc != null) {
      // A record refused before it was sent (too large for the client) is told so in send() itself, on
      // this task's thread; the client then fails the records queued before it with that same exception.
      boolean own = Thread.currentThread() == sendingThread;
      if (own) {
        ownFaults.add(exc);
      }
      // the record the broker refused, not one refused for sharing its record batch (KIP-467) or its
      // queue with a record refused before it was sent
      boolean collateral = collateral(exc) || (!own && ownFaults.contains(exc));
      Object[] first = failed.get();
      if (first == null || (Boolean.TRUE.equals(first[3]) && !collateral)) {
        failed.set(new Object[] {exc, out, offset, collateral});
      }
      if (!collateral) {
        refused.add(new Object[] {exc, out, offset, null});
      }
    } else {
      witnesses.delivered(metadata.topic(), metadata.partition(), metadata.offset());
    }
  }

  /** The refusal of the transaction's failed delivery: the input record whose output failed. */
  private IllegalStateException refusal() {
    Object[] refused = failed.get();
    Exception exc = (Exception) refused[0];
    return Refusal.of(
        "ProduceError", exc, "kind", "refused", "output_topic", refused[1], "reason", String.valueOf(exc.getMessage()),
        "exception", exc.getClass().getSimpleName(),
        "topic", topic, "partition", partition, "offset", refused[2], "poison", poison(exc));
  }

  /** A record refused only because another record of its batch was (the client's words, KIP-467). */
  private static boolean collateral(Exception exc) {
    return exc.getClass() == KafkaException.class;
  }

  /** The row's key column as the output's key (null: none, or no key column). */
  private byte[] key(InternalRow row) {
    return s.key < 0 || row.isNullAt(s.key) ? null : bytes(row, s.key, s.keyIsString);
  }

  private byte[] value(InternalRow row) {
    return row.isNullAt(s.value) ? null : bytes(row, s.value, s.valueIsString);
  }

  private static byte[] bytes(InternalRow row, int i, boolean string) {
    return string ? row.getUTF8String(i).getBytes() : row.getBinary(i);
  }

  /** Step 7: outputs delivered (7b), the next input offset stamped with the witnesses and sent (7c), the
   * transaction committed (7d). */
  private void commit() {
    long t = System.nanoTime();
    producer.flush();
    while (failed.get() != null || !refused.isEmpty()) {
      if (letters == null) {
        throw refusal();
      }
      redo();
      producer.flush();
    }
    flushSeconds += (System.nanoTime() - t) / 1e9;
    Crash.point("after_produce"); // F2
    Map<TopicPartition, Long> seen = witnesses.take();
    // 7c. The next input offset, stamped (exactly_once: with the transaction's witnesses and where its
    // input began); committed with a NUL terminator, byte for byte as the Python path's client commits it:
    // confluent-kafka reads committed metadata as a C string, and past the end of one committed without it
    long next = lastOffset + 1;
    long t1 = System.nanoTime();
    long t2;
    String stamp;
    if (s.exactlyOnce) {
      stamp = Stamp.of(s.appId, s.out, committed, seen);
      producer.sendOffsetsToTransaction(
          Collections.singletonMap(tp, new OffsetAndMetadata(next, stamp + "\0")),
          new ConsumerGroupMetadata(s.group));
      t2 = System.nanoTime();
      Crash.point("after_send_offsets"); // F3
      producer.commitTransaction(); // 7d. Outputs and offset become visible together.
    } else {
      // 7d. at_least_once: the offset is committed once the outputs are acknowledged.
      stamp = Stamp.of(s.appId, s.out, null, new HashMap<>());
      t2 = System.nanoTime();
      KafkaConsumer<byte[], byte[]> consumer = Producers.consumer(s.consumer);
      synchronized (consumer) {
        consumer.commitSync(
            Collections.singletonMap(tp, new OffsetAndMetadata(next, stamp + "\0")),
            Duration.ofMillis(s.timeoutMs));
      }
    }
    long t3 = System.nanoTime();
    Crash.point("after_commit"); // F4
    sendOffsetsSeconds += (t2 - t1) / 1e9;
    endSeconds += (t3 - t2) / 1e9;
    double seconds = (t3 - t) / 1e9;
    commitMax = Math.max(commitMax, seconds);
    commitTotal += seconds;
    open = false;
    transactions++;
    inTransaction = 0;
    outputsInTransaction = 0;
    deadLetters += lettersInTransaction;
    lettersInTransaction = 0;
    pending.clear();
    committed = next;
    lastStamp = stamp;
    Producers.proven(tid, stamp); // seen committed by this JVM: no read-back when it starts from it
  }

  /** The last transaction committed, the producer kept for the JVM's next task; the stats row. */
  List<Object> finish() {
    if (open) {
      commit();
    }
    if (!s.exactlyOnce) {
      // the JVM's shared producer stays open
    } else if (lastStamp != null) {
      Producers.keep(tid, producer, lastStamp, s.maxProducers);
    } else {
      producer.close(Duration.ZERO); // it committed nothing: the next task cannot trust it (step 2)
    }
    producer = null;
    return stats();
  }

  /** After `error` (null: not known): the open transaction aborted where the producer still can, the
   * producer closed. A fenced producer is said in the executor's log in the Python path's words (8c): a
   * newer attempt owns the transactional.id, so this one is a zombie; or, for a kept producer before its
   * first commit in this task, another executor took the partition (the Python path replaces such a
   * producer and replays; here Spark's task retry starts again with a fresh one). */
  void fail(Throwable error) {
    if (fenced(error)) {
      if (reused && transactions == 0) {
        LOG.warn("kept producer displaced: {} ({})", tid, error.toString());
      } else {
        LOG.error("fenced: this attempt is a zombie: {} ({})", tid, error.toString());
      }
    }
    if (producer == null || !s.exactlyOnce) {
      producer = null; // at_least_once: the shared producer stays; what it sent is written again
      return;
    }
    // A task Spark cancels (another task failed the stage, the query stopped) is interrupted, and an
    // interrupted thread's abortTransaction throws before it sends EndTxn: the transaction would stay
    // open, holding back read_committed consumers of the output until transaction.timeout.ms.
    boolean interrupted = Thread.interrupted();
    try {
      if (open) {
        try {
          producer.abortTransaction();
          aborted++;
        } catch (RuntimeException ignored) {
          // fenced or fatal: the next incarnation's initTransactions aborts it
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
    producer.close(Duration.ZERO);
    producer = null;
  }

  /** Whether `error` (or what caused it) says a newer producer owns the transactional.id. */
  private static boolean fenced(Throwable error) {
    for (Throwable e = error; e != null; e = e.getCause() == e ? null : e.getCause()) {
      if (e instanceof ProducerFencedException || e instanceof InvalidProducerEpochException) {
        return true;
      }
    }
    return false;
  }

  /** The stats row of eos's STATS_DDL, in its order, as plain Java values (a task's result). */
  private List<Object> stats() {
    TaskContext task = TaskContext.get();
    String executor = task == null ? null : task.getLocalProperty("eos.executor");
    String placed = task == null ? null : task.getLocalProperty("eos.executor.placed");
    List<Object> v = new ArrayList<>();
    v.add(topic);
    v.add(partition);
    v.add(s.exactlyOnce ? tid : null);
    v.add(recordsIn);
    v.add(skipped);
    v.add(recordsOut);
    v.add(transactions);
    v.add(aborted);
    v.add(0L); // redos
    v.add(producersReplaced);
    v.add(producersCreated);
    v.add(commitMax);
    v.add(commitTotal);
    v.add(firstOffset < 0 ? null : firstOffset);
    v.add(lastOffset < 0 ? null : lastOffset);
    v.add(committedBefore);
    v.add(0L); // restored
    v.add(0L); // snapshots_restored
    v.add(0L); // snapshots_taken
    v.add(deadLetters);
    v.add(executor);
    v.add(executor != null && executor.equals(placed) ? 1L : 0L);
    v.add((System.nanoTime() - t0) / 1e9);
    v.add(startSeconds);
    v.add(initSeconds);
    v.add(offsetsSeconds);
    v.add(checkSeconds);
    v.add(flushSeconds);
    v.add(sendOffsetsSeconds);
    v.add(endSeconds);
    return v;
  }
}
