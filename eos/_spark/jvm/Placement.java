/*
 * The two JVM pieces of eos's task placement (eos/_spark/_affinity.py drives them through Py4J on the
 * driver of a classic session). Spark's Kafka source prefers an executor per topic-partition by hashing
 * over the executors alive, so a change of executors moves partitions away from executors that still
 * hold their state stores; a Python sink cannot say where a task runs. Placement is a coalescer whose
 * groups carry the executor eos chose, which CoalescedRDD hands to the scheduler as the task's preferred
 * location; Where tells each task's Python worker which executor it runs on.
 *
 * Written against Java and Scala types that Spark 3.5 (Scala 2.12) and 4.x (2.13) share; the one Scala
 * collection call whose signature differs between the two is made by name, and Scala212 is the
 * coalescer for 2.12 (compiled with stub/scala/Serializable.java in place of 2.12's interface).
 */
package eos.spark;

import java.io.Serializable;
import java.lang.reflect.Method;
import java.util.Iterator;
import org.apache.spark.Partition;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.PartitionCoalescer;
import org.apache.spark.rdd.PartitionGroup;
import org.apache.spark.rdd.RDD;
import org.apache.spark.storage.BlockManagerId;
import scala.Option;

/** Groups of parent partitions (by index), each preferring one executor location (null: none). */
public class Placement implements PartitionCoalescer, Serializable {
  private static final long serialVersionUID = 1L;

  /** The local property Where sets: the executor a task runs on, as Spark names a task location. */
  public static final String PROPERTY = "eos.executor";

  /** The local property Where sets: the executor eos placed the task on (absent: none). */
  public static final String PLACED = "eos.executor.placed";

  private final int[][] groups;
  private final String[] locations;

  public Placement(int[][] groups, String[] locations) {
    if (groups.length != locations.length) {
      throw new IllegalArgumentException("one location per group");
    }
    this.groups = groups;
    this.locations = locations;
  }

  @Override
  public PartitionGroup[] coalesce(int maxPartitions, RDD<?> parent) {
    Partition[] parts = parent.partitions();
    boolean[] seen = new boolean[parts.length];
    int count = 0;
    for (int[] group : groups) {
      for (int i : group) {
        if (i < 0 || i >= parts.length || seen[i]) {
          throw new IllegalStateException("partition " + i + " of " + parts.length + " placed twice or unknown");
        }
        seen[i] = true;
        count++;
      }
    }
    if (count != parts.length) { // a partition no group names would be dropped without a word
      throw new IllegalStateException(count + " of " + parts.length + " partitions placed");
    }
    PartitionGroup[] out = new PartitionGroup[groups.length];
    try {
      Method add = null; // ArrayBuffer's += returns ArrayBuffer in 2.12, Growable in 2.13
      for (int g = 0; g < groups.length; g++) {
        out[g] = new PartitionGroup(Option.apply(locations[g]));
        Object buffer = out[g].partitions();
        if (add == null) {
          add = buffer.getClass().getMethod("$plus$eq", Object.class);
        }
        for (int i : groups[g]) {
          add.invoke(buffer, parts[i]);
        }
      }
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("eos could not group the batch's partitions", e);
    }
    return out;
  }

  /**
   * The same for Scala 2.12 (Spark 3.5), whose CoalescedRDD requires a scala.Serializable coalescer;
   * that interface does not exist in 2.13, so this class is loaded only on 2.12.
   */
  public static final class Scala212 extends Placement implements scala.Serializable {
    private static final long serialVersionUID = 1L;

    public Scala212(int[][] groups, String[] locations) {
      super(groups, locations);
    }
  }

  /**
   * Passes a task's rows on unchanged, first setting PROPERTY and PLACED for its Python worker to read
   * (the task's partition is its group: locations[partition] is where eos placed it).
   */
  public static final class Where implements FlatMapFunction<Iterator<Object>, Object> {
    private static final long serialVersionUID = 1L;
    private final String[] locations;

    public Where(String[] locations) {
      this.locations = locations;
    }

    @Override
    public Iterator<Object> call(Iterator<Object> rows) {
      BlockManagerId id = SparkEnv.get().blockManager().blockManagerId();
      TaskContext task = TaskContext.get();
      task.getLocalProperties().setProperty(PROPERTY, "executor_" + id.host() + "_" + id.executorId());
      String placed = locations[task.partitionId()];
      if (placed != null) {
        task.getLocalProperties().setProperty(PLACED, placed);
      }
      return rows;
    }
  }
}
