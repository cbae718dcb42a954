/*
 * format("eos") as Spark resolves it (Spark 4.0+): Spark looks up the class "<name>.DefaultSource" before
 * the Python data sources a session registered, so with eos's jar on Spark's class path this class is
 * "eos". It hands everything to eos's Python data source, registered as "eos-python" by eos.register,
 * except a stream that eos's Python side (eos/_spark/_format_jvm.py, the Router: the classic driver's own
 * Python process, or on a Spark Connect server the one ServerDriver starts) says takes the JVM data path:
 * that stream gets a sink whose batches go to the foreachBatch sink in that Python process, so its rows
 * are written by the executors' Kafka clients (JvmWriter) and never enter Python.
 */
package eos;

import java.util.Collections;
import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder;
import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.execution.streaming.Sink;
import org.apache.spark.sql.execution.streaming.sources.ForeachBatchSink;
import org.apache.spark.sql.sources.StreamSinkProvider;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.slf4j.LoggerFactory;
import scala.runtime.AbstractFunction2;
import scala.runtime.BoxedUnit;

public final class DefaultSource implements TableProvider, StreamSinkProvider {
  /** The name eos.register gives eos's Python data source where this class is "eos". */
  public static final String PYTHON = "eos-python";

  /** The session conf eos.register sets: "" where "eos" was registered without functions, else why its
   * streams stay on the Python data source. */
  public static final String FUNCTIONS = "spark.eos.format.functions";

  /** eos's Python side: the classic driver's Python process (a Py4J callback into it), or on a Spark
   * Connect server the Python process ServerDriver starts. */
  public interface Router {
    /** "jvm" where the stream with these options, in a session whose FUNCTIONS conf is `functions`,
     * takes the JVM data path; anything else: the Python data source writes it. */
    String route(String functions, Map<String, String> options);

    /** The batches of a stream routed "jvm": the foreachBatch sink of these options. */
    Batches batches(Map<String, String> options);
  }

  /** A stream's foreachBatch sink, in the Router's Python process. */
  public interface Batches {
    void call(Dataset<Row> batch, long batchId, String queryId);
  }

  private static volatile Router router;

  /** Set by eos.register on a classic driver (one Python process per driver JVM). */
  public static void route(Router r) {
    router = r;
  }

  private static TableProvider python() {
    SparkSession session = SparkSession.active();
    if (!((org.apache.spark.sql.classic.SparkSession) session)
        .sessionState()
        .dataSourceManager()
        .dataSourceExists(PYTHON)) {
      throw new IllegalStateException(
          "format(\"eos\") is registered by eos: call eos.register(spark) (eos.spark_session() does)"
              + " in this session before using it");
    }
    PythonDataSourceV2 p = new PythonDataSourceV2();
    p.setShortName(PYTHON);
    return p;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return python().inferSchema(options);
  }

  @Override
  public Transform[] inferPartitioning(CaseInsensitiveStringMap options) {
    return python().inferPartitioning(options);
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true; // as a Python data source: the DataFrame's schema is the table's
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    Table table = python().getTable(schema, partitioning, properties);
    SparkSession session = SparkSession.active();
    String functions = session.conf().get(FUNCTIONS, null);
    Router r = router;
    if (r != null) { // a classic driver's
      return "jvm".equals(r.route(functions, properties)) ? new NoStreams((SupportsWrite) table) : table;
    }
    if (functions == null) { // no eos registered "eos" in this session
      return table;
    }
    try { // a Spark Connect server: its client registered eos
      if ("jvm".equals(ServerDriver.router(session).route(functions, properties))) {
        return new NoStreams((SupportsWrite) table);
      }
    } catch (RuntimeException e) { // the stream stays on the Python data source (which refuses
      LoggerFactory.getLogger(DefaultSource.class) // eos.data.path=jvm, naming why)
          .warn("format(\"eos\") takes the Python data source: " + e.getMessage(), e);
    }
    return table;
  }

  @Override
  public Sink createSink(
      SQLContext context,
      scala.collection.immutable.Map<String, String> parameters,
      scala.collection.immutable.Seq<String> partitionColumns,
      OutputMode mode) {
    if (OutputMode.Update().equals(mode)) { // as Spark refuses it for the Python data source
      throw new UnsupportedOperationException(
          "Data source eos does not support Update mode: format(\"eos\") writes append-mode queries;"
              + " for an aggregation in update mode use foreachBatch(eos.sink(config))");
    }
    Map<String, String> options = scala.jdk.javaapi.CollectionConverters.asJava(parameters);
    return new Sink() {
      private Router from;
      private Batches batches;

      @Override
      public void addBatch(long batchId, Dataset<Row> data) {
        // on a Connect server, the running eos process's: one that died is replaced for the next batch
        Router r = router != null ? router : ServerDriver.router(data.sparkSession());
        if (r != from) {
          batches = r.batches(options);
          from = r;
        }
        Batches current = batches;
        // StreamExecution.QUERY_ID_KEY (a class Spark 4.1 moved to another package)
        String query = data.sparkSession().sparkContext().getLocalProperty("sql.streaming.queryId");
        AbstractFunction2<Dataset<Row>, Object, BoxedUnit> call =
            new AbstractFunction2<Dataset<Row>, Object, BoxedUnit>() {
              @Override
              public BoxedUnit apply(Dataset<Row> batch, Object id) {
                current.call(batch, (Long) id, query);
                return BoxedUnit.UNIT;
              }
            };
        // as foreachBatch: the batch as a Dataset of its own (not the stream's plan)
        new ForeachBatchSink<Row>(call, ExpressionEncoder.apply(data.schema())).addBatch(batchId, data);
      }

      @Override
      public String toString() {
        return "eos";
      }
    };
  }

  /** The Python data source's table without its streaming write: Spark then asks createSink. */
  private static final class NoStreams implements SupportsWrite {
    private final SupportsWrite table;

    NoStreams(SupportsWrite table) {
      this.table = table;
    }

    @Override
    public String name() {
      return table.name();
    }

    @Override
    @SuppressWarnings("deprecation")
    public StructType schema() {
      return table.schema();
    }

    @Override
    public Column[] columns() {
      return table.columns();
    }

    @Override
    public Transform[] partitioning() {
      return table.partitioning();
    }

    @Override
    public Map<String, String> properties() {
      return table.properties();
    }

    @Override
    public Set<TableCapability> capabilities() {
      Set<TableCapability> out = EnumSet.noneOf(TableCapability.class);
      out.addAll(table.capabilities());
      out.remove(TableCapability.STREAMING_WRITE);
      return Collections.unmodifiableSet(out);
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
      return table.newWriteBuilder(info);
    }
  }
}
