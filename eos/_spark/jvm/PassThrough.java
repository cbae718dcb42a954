/*
 * The JVM data path: a batch whose rows are written to Kafka as they are (no Python function per row)
 * written by the JVM's Kafka client in the executors, its rows never entering Python. The driver
 * (eos/_spark/_jvm_writer.py) runs the sink's checks, then hands the batch and its plan to JvmWriter,
 * which runs this task function over the batch's Spark partitions. Per task: step 0 (each row's input
 * coordinates are the Kafka source's), the rows cut into one run per input topic-partition in increasing
 * offset order, each run written by an InputPartition (steps 1-7).
 */
package eos.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.unsafe.types.UTF8String;

/** A task's rows written exactly once; one stats row per input partition (eos's STATS_DDL order). */
public class PassThrough implements FlatMapFunction<Iterator<InternalRow>, List<Object>>, Serializable {
  private static final long serialVersionUID = 1L;

  private final String spec;
  private transient Spec parsed;

  /** `spec`: the batch's plan as JSON (eos/_spark/_jvm_writer.py). */
  public PassThrough(String spec) {
    this.spec = spec;
  }

  @Override
  public Iterator<List<Object>> call(Iterator<InternalRow> rows) throws Exception {
    if (parsed == null) {
      parsed = Spec.parse(spec);
    }
    Spec s = parsed;
    TaskContext task = TaskContext.get();
    int taskPartition = task == null ? 0 : task.partitionId();
    List<List<Object>> stats = new ArrayList<>();
    Set<String> done = new HashSet<>();
    InputPartition run = null;
    UTF8String runTopic = null; // the run's topic as the rows hold it: no String made per row
    long last = -1;
    Throwable error = null;
    try {
      while (rows.hasNext()) {
        InternalRow row = rows.next();
        UTF8String topic = row.isNullAt(s.topic) ? null : row.getUTF8String(s.topic);
        if (topic == null || row.isNullAt(s.partition) || row.isNullAt(s.offset)) {
          throw missing(row, s, topic);
        }
        int partition = row.getInt(s.partition);
        long offset = row.getLong(s.offset);
        check(s, row, taskPartition, topic, partition, offset); // 0
        if (run == null || partition != run.partition || !topic.equals(runTopic)) {
          if (run != null) {
            stats.add(run.finish());
            run = null;
          }
          String name = topic.toString();
          if (!done.add(name + "/" + partition)) {
            throw Refusal.of(
                "InputOrderError", "kind", "two_runs", "topic", name, "partition", partition, "offset", offset);
          }
          runTopic = topic.clone();
          run = new InputPartition(s, name, partition);
          run.start(offset);
          last = -1;
        } else if (offset <= last) {
          throw Refusal.of(
              "InputOrderError", "kind", "not_increasing", "topic", run.topic, "partition", partition,
              "offset", offset);
        }
        last = offset;
        run.write(row, offset);
      }
      if (run != null) {
        stats.add(run.finish());
        run = null;
      }
    } catch (RuntimeException | Error e) {
      error = e;
      throw e;
    } finally {
      if (run != null) {
        run.fail(error);
      }
    }
    return stats.iterator();
  }

  /** Step 0, a row without its input coordinates: the first of them it lacks named. */
  private static IllegalStateException missing(InternalRow row, Spec s, UTF8String topic) {
    Integer partition = row.isNullAt(s.partition) ? null : row.getInt(s.partition);
    Long offset = row.isNullAt(s.offset) ? null : row.getLong(s.offset);
    return Refusal.of(
        "InputCoordinateError", "column", topic == null ? "topic" : partition == null ? "partition" : "offset",
        "topic", topic == null ? null : topic.toString(), "partition", partition, "offset", offset, "source", null);
  }

  /** Step 0: the row's topic, partition and offset are those of the record the Kafka source read it
   * from (the Spark partition it was read in, and that partition's offset range). */
  private static void check(Spec s, InternalRow row, int taskPartition, UTF8String topic, int partition, long offset) {
    if (s.sources == null) {
      return;
    }
    int readIn = s.readIn >= 0 ? row.getInt(s.readIn) : taskPartition;
    Spec.Source source = s.sources[readIn];
    String column =
        !source.utf8.equals(topic) ? "topic"
            : source.partition != partition ? "partition"
            : offset < source.start || offset >= source.end ? "offset"
            : null;
    if (column != null) {
      throw Refusal.of(
          "InputCoordinateError", "column", column, "topic", topic.toString(), "partition", partition,
          "offset", offset, "source", readIn);
    }
  }
}
