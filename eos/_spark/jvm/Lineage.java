/*
 * What Spark's Kafka source read for a batch, read from the batch's RDD lineage without running a job
 * (eos/_spark/_partitioning.py says why eos needs it): the walk _partitioning makes through Py4J in a
 * classic session (which needs no jar), made in the JVM for a Spark Connect server (ConnectPlugin), whose
 * clients have no JVM handle; a test holds the two to the same answers. Classes of Spark's Kafka
 * connector and Scala collections are reached by name, so that one jar reads Spark 3.5 (Scala 2.12) and
 * 4.x (2.13), whose connector shapes a source partition differently (4.2: one Option, before: a Seq).
 */
package eos.spark;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.lang.reflect.Method;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.Dependency;
import org.apache.spark.OneToOneDependency;
import org.apache.spark.Partition;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;

/** The Kafka ranges a batch read: by Spark partition where each step down to the source is one-to-one. */
public final class Lineage {
  private static final ObjectMapper JSON = new ObjectMapper();
  /** a data source's RDD (the streaming Kafka source, and batch reads with the v2 source) */
  private static final String SOURCE_RDD = "org.apache.spark.sql.execution.datasources.v2.DataSourceRDD";
  /** the RDD of spark.read.format("kafka") (a v1 source by default), whose partitions are the ranges */
  private static final String KAFKA_RDD = "org.apache.spark.sql.kafka010.KafkaSourceRDD";
  private static final String KAFKA_PARTITION = "org.apache.spark.sql.kafka010.KafkaBatchInputPartition";
  private static final int MAX_DEPTH = 200;
  /** a batch read's range may name the partition's start (-2) or end (-1), resolved when its task runs */
  private static final long OPEN_END = Long.MAX_VALUE;

  /** Thrown where the lineage shows no Kafka ranges to trust. */
  private static final class Unknown extends Exception {
    private static final long serialVersionUID = 1L;

    Unknown() {
      super(null, null, false, false);
    }
  }

  /** `batch`'s lineage as JSON, `{"partitions": [[topic, partition, start, end], ...] or null, "ranges":
   * [...]}`, or "null" where it cannot be known (no Kafka source, or a shape this Spark has otherwise). */
  public String read(Dataset<?> batch) throws JsonProcessingException {
    return JSON.writeValueAsString(of(batch.queryExecution().toRdd()));
  }

  static Map<String, Object> of(RDD<?> rdd) {
    try {
      RDD<?> source = oneToOneSource(rdd);
      if (source != null) {
        List<List<Object>> partitions = rangesOf(source);
        return result(partitions, partitions);
      }
      List<List<Object>> ranges = new ArrayList<>();
      Set<Integer> seen = new HashSet<>();
      Deque<RDD<?>> todo = new ArrayDeque<>();
      todo.push(rdd);
      while (!todo.isEmpty()) {
        if (seen.size() > MAX_DEPTH) {
          return null;
        }
        RDD<?> node = todo.pop();
        if (!seen.add(node.id())) {
          continue;
        }
        if (isSource(node)) {
          ranges.addAll(rangesOf(node));
        }
        for (Dependency<?> dep : dependencies(node)) {
          todo.push(dep.rdd());
        }
      }
      return ranges.isEmpty() ? null : result(null, ranges);
    } catch (Unknown | ReflectiveOperationException | RuntimeException e) {
      return null; // not inspectable: the rows' eos_input column is checked instead
    }
  }

  private static Map<String, Object> result(List<List<Object>> partitions, List<List<Object>> ranges) {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("partitions", partitions);
    out.put("ranges", ranges);
    return out;
  }

  private static boolean isSource(RDD<?> rdd) {
    String name = rdd.getClass().getName();
    return name.equals(SOURCE_RDD) || name.equals(KAFKA_RDD);
  }

  /** The source RDD at the end of a chain of one-to-one dependencies from `rdd`, else null. */
  private static RDD<?> oneToOneSource(RDD<?> rdd) throws ReflectiveOperationException {
    for (int i = 0; i < MAX_DEPTH; i++) {
      List<Dependency<?>> deps = dependencies(rdd);
      if (deps.isEmpty()) {
        return isSource(rdd) ? rdd : null;
      }
      if (deps.size() != 1 || !deps.get(0).getClass().equals(OneToOneDependency.class)) {
        return null;
      }
      rdd = deps.get(0).rdd();
    }
    return null;
  }

  /** The Kafka range of each partition of a source RDD; Unknown where one is not a Kafka range. */
  private static List<List<Object>> rangesOf(RDD<?> source) throws ReflectiveOperationException, Unknown {
    List<List<Object>> out = new ArrayList<>();
    boolean v1 = source.getClass().getName().equals(KAFKA_RDD);
    for (Partition part : source.partitions()) {
      Object range;
      if (v1) {
        range = call(part, "offsetRange");
      } else {
        Object input = onlyInput(part);
        if (input == null || !input.getClass().getName().equals(KAFKA_PARTITION)) {
          throw new Unknown(); // a source that is not Kafka: its rows carry no coordinates of their own
        }
        range = call(input, "offsetRange");
      }
      Object tp = call(range, "topicPartition");
      long start = (Long) call(range, "fromOffset");
      long end = (Long) call(range, "untilOffset");
      out.add(
          Arrays.<Object>asList(
              call(tp, "topic"), call(tp, "partition"), Math.max(start, 0), end >= 0 ? end : OPEN_END));
    }
    return out;
  }

  /** The one input partition a DataSourceRDDPartition reads, or null: Spark 3.5-4.1 hold a Seq
   * (`inputPartitions`), Spark 4.2 an Option (`inputPartition`). */
  private static Object onlyInput(Object part) throws ReflectiveOperationException {
    Method seq = method(part, "inputPartitions");
    if (seq != null) {
      Object inputs = seq.invoke(part);
      return ((Integer) call(inputs, "size")) == 1 ? call(inputs, "head") : null;
    }
    Object one = call(part, "inputPartition");
    return ((Boolean) call(one, "isDefined")) ? call(one, "get") : null;
  }

  /** An RDD's dependencies (a Scala Seq whose type differs between Scala 2.12 and 2.13: read by name). */
  private static List<Dependency<?>> dependencies(RDD<?> rdd) throws ReflectiveOperationException {
    Object seq = RDD.class.getMethod("dependencies").invoke(rdd);
    int size = (Integer) call(seq, "size");
    List<Dependency<?>> out = new ArrayList<>(size);
    Method apply = seq.getClass().getMethod("apply", int.class);
    for (int i = 0; i < size; i++) {
      out.add((Dependency<?>) apply.invoke(seq, i));
    }
    return out;
  }

  private static Object call(Object target, String name) throws ReflectiveOperationException {
    Method m = method(target, name);
    if (m == null) {
      throw new NoSuchMethodException(target.getClass().getName() + "." + name);
    }
    return m.invoke(target);
  }

  private static Method method(Object target, String name) {
    try {
      Method m = target.getClass().getMethod(name);
      m.setAccessible(true);
      return m;
    } catch (NoSuchMethodException e) {
      return null;
    }
  }
}
