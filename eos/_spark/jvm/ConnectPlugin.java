/*
 * The JVM data path under Spark Connect (Spark 4.0+). A Connect client has no JVM to call, so the sink's
 * driver side, running in the server's foreachBatch worker, sends its requests as a relation the server
 * plans with this plugin (started with eos's jar and
 * spark.connect.extensions.relation.classes=eos.spark.ConnectPlugin; eos/_spark/_server.py sends them):
 * the batch's lineage, as Lineage reads it for a classic driver, and the batch written by the same
 * PassThrough tasks JvmWriter runs. The relation is eos.Request: field 1 the batch's relation, field 2 the
 * request as JSON ({"op": "version"}, {"op": "lineage"}, or {"op": "write", "spec": ...}, with "lineage":
 * true where the spec's sources are the batch's lineage, read here).
 */
package eos.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.Function;
import org.apache.spark.connect.proto.Relation;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connect.planner.SparkConnectPlanner;
import org.apache.spark.sql.connect.plugin.RelationPlugin;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.sparkproject.connect.protobuf.Any;
import org.sparkproject.connect.protobuf.CodedInputStream;

/** Plans eos's requests: one string column, "answer". */
public class ConnectPlugin implements RelationPlugin {
  /** The type of eos's requests (eos/_spark/_server.py's TYPE_URL). */
  static final String TYPE = "type.googleapis.com/eos.Request";
  /** What the requests and answers look like; eos/_spark/_server.py's VERSION must be the same (a server
   * started with another eos's jar is refused by the sink, not sent plans this jar reads otherwise). */
  static final String VERSION = "1";
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final StructType ANSWER = new StructType().add("answer", DataTypes.StringType, false);

  @Override
  public Optional<LogicalPlan> transform(byte[] relation, SparkConnectPlanner planner) {
    try {
      Any any = Any.parseFrom(relation);
      if (!TYPE.equals(any.getTypeUrl())) {
        return Optional.empty(); // another plugin's
      }
      Relation child = null;
      String request = null;
      CodedInputStream in = any.getValue().newCodedInput();
      for (int tag = in.readTag(); tag != 0; tag = in.readTag()) {
        if (tag == (1 << 3 | 2)) {
          child = Relation.parseFrom(in.readBytes());
        } else if (tag == (2 << 3 | 2)) {
          request = in.readStringRequireUtf8();
        } else {
          in.skipField(tag);
        }
      }
      if (child == null || request == null) {
        throw new IllegalArgumentException("an eos request without its relation or its request");
      }
      SparkSession session = planner.session();
      JsonNode asked = JSON.readTree(request);
      String op = asked.path("op").asText();
      if (op.equals("version")) {
        return answer(session, VERSION);
      }
      Dataset<Row> batch = Dataset.ofRows(session, planner.transformRelation(child));
      if (op.equals("lineage")) {
        return answer(session, new Lineage().read(batch));
      }
      if (op.equals("write")) { // run when the client collects the answer: one row per task's stats row
        String spec = JSON.writeValueAsString(asked.get("spec"));
        JavaRDD<List<Object>> tasks;
        if (asked.path("lineage").asBoolean(false)) { // JvmWriter.writeAsRead's, in one request
          JvmWriter.AsRead asRead = JvmWriter.asRead(batch, spec);
          if (asRead.tasks == null) {
            return answer(session, asRead.declined());
          }
          tasks = asRead.tasks;
        } else {
          tasks = JvmWriter.tasks(batch, spec);
        }
        return Optional.of(session.createDataFrame(tasks.map(new StatsAsJson()), ANSWER).logicalPlan());
      }
      throw new IllegalArgumentException("an eos request this jar does not know: " + op);
    } catch (IOException e) {
      throw new IllegalArgumentException("an eos request this jar cannot read", e);
    }
  }

  /** A one-row answer. */
  private static Optional<LogicalPlan> answer(SparkSession session, String answer) {
    return Optional.of(
        session.createDataFrame(Collections.singletonList(RowFactory.create(answer)), ANSWER).logicalPlan());
  }

  /** A stats row as JSON, in the executors (which need not have Spark Connect's classes: nothing of
   * ConnectPlugin's own is loaded there). */
  private static final class StatsAsJson implements Function<List<Object>, Row> {
    private static final long serialVersionUID = 1L;
    private static final ObjectMapper WRITER = new ObjectMapper();

    @Override
    public Row call(List<Object> stats) throws IOException {
      return RowFactory.create(WRITER.writeValueAsString(stats));
    }
  }
}
