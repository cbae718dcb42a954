/*
 * The driver's one call per batch into the JVM data path (eos/_spark/_jvm_writer.py). Every Py4J round
 * trip costs the driver time at each trigger (a column list, a DataFrame step, a collect each take
 * several), so the batch's columns are chosen, its Spark job run and its figures returned in one call.
 */
package eos.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.List;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/** A batch written by PassThrough tasks, one per Spark partition. */
public final class JvmWriter {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** `batch`'s columns named by `spec`'s "select", in that order, written as `spec` plans; the stats rows
   * (eos's STATS_DDL order) as a JSON array of arrays. */
  public String write(Dataset<Row> batch, String spec) throws IOException {
    return JSON.writeValueAsString(tasks(batch, spec).collect());
  }

  /** The batch's tasks, not yet run: one stats row per input partition each task wrote. */
  static JavaRDD<List<Object>> tasks(Dataset<Row> batch, String spec) throws IOException {
    JsonNode names = JSON.readTree(spec).get("select");
    String[] rest = new String[names.size() - 1];
    for (int i = 1; i < names.size(); i++) {
      rest[i - 1] = names.get(i).asText();
    }
    Dataset<Row> selected = batch.select(names.get(0).asText(), rest);
    return selected.queryExecution().toRdd().toJavaRDD().mapPartitions(new PassThrough(spec), true);
  }
}
