/*
 * The driver's one call per batch into the JVM data path (eos/_spark/_jvm_writer.py). Every Py4J round
 * trip costs the driver time at each trigger (a column list, a DataFrame step, a collect each take
 * several), so the batch's columns are chosen, its lineage read, its Spark job run and its figures
 * returned in one call. eos's Connect plugin runs the same tasks for a Spark Connect session.
 */
package eos.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;

/** A batch written by PassThrough tasks, one per Spark partition. */
public final class JvmWriter {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** `batch`'s columns named by `spec`'s "select", in that order, written as `spec` plans; the stats rows
   * (eos's STATS_DDL order) as a JSON array of arrays. */
  public String write(Dataset<Row> batch, String spec) throws IOException {
    return JSON.writeValueAsString(tasks(batch, spec).collect());
  }

  /** As `write`, the spec's sources the lineage of the plan the tasks run (the batch planned once),
   * where each Spark partition read one input partition that no other read; else the answer is
   * `{"lineage": ...}` (Lineage's, never an array as the stats are) and nothing is written. */
  public String writeAsRead(Dataset<Row> batch, String spec) throws IOException {
    AsRead asRead = asRead(batch, spec);
    return asRead.tasks == null ? asRead.declined() : JSON.writeValueAsString(asRead.tasks.collect());
  }

  /** The batch's tasks, not yet run: one stats row per input partition each task wrote. */
  static JavaRDD<List<Object>> tasks(Dataset<Row> batch, String spec) throws IOException {
    return selected(batch, JSON.readTree(spec)).toJavaRDD().mapPartitions(new PassThrough(spec), true);
  }

  /** `writeAsRead`'s tasks, not yet run, or (tasks null) the lineage that keeps them from running. */
  static AsRead asRead(Dataset<Row> batch, String spec) throws IOException {
    ObjectNode plan = (ObjectNode) JSON.readTree(spec);
    RDD<InternalRow> rows = selected(batch, plan);
    Map<String, Object> lineage = Lineage.of(rows);
    Object partitions = lineage == null ? null : lineage.get("partitions");
    if (!oneRunPerTask(partitions)) {
      return new AsRead(null, lineage);
    }
    plan.set("sources", JSON.valueToTree(partitions));
    PassThrough tasks = new PassThrough(JSON.writeValueAsString(plan));
    return new AsRead(rows.toJavaRDD().mapPartitions(tasks, true), lineage);
  }

  /** The rows of `batch`'s columns named by the plan's "select", in that order. */
  private static RDD<InternalRow> selected(Dataset<Row> batch, JsonNode plan) {
    JsonNode names = plan.get("select");
    String[] rest = new String[names.size() - 1];
    for (int i = 1; i < names.size(); i++) {
      rest[i - 1] = names.get(i).asText();
    }
    return batch.select(names.get(0).asText(), rest).queryExecution().toRdd();
  }

  /** Whether Lineage's `partitions` name, per Spark partition, an input partition that no other names
   * (the sink's Lineage.one_run_per_task). */
  private static boolean oneRunPerTask(Object partitions) {
    if (!(partitions instanceof List)) {
      return false;
    }
    Set<List<Object>> seen = new HashSet<>();
    for (Object range : (List<?>) partitions) {
      List<?> r = (List<?>) range;
      if (!seen.add(Arrays.asList(r.get(0), r.get(1)))) {
        return false;
      }
    }
    return true;
  }

  /** A batch's tasks as read (null where the lineage keeps them from running) and its lineage. */
  static final class AsRead {
    final JavaRDD<List<Object>> tasks;
    final Map<String, Object> lineage;

    AsRead(JavaRDD<List<Object>> tasks, Map<String, Object> lineage) {
      this.tasks = tasks;
      this.lineage = lineage;
    }

    /** The answer where the tasks do not run: `{"lineage": ...}`. */
    String declined() throws IOException {
      return JSON.writeValueAsString(Collections.singletonMap("lineage", lineage));
    }
  }
}
