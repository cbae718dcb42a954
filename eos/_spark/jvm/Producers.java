/*
 * What an executor JVM keeps between the JVM writer's tasks: transactional producers by transactional.id
 * (initTransactions costs a coordinator round trip and fences every older incarnation; a task's input
 * partition usually comes back to the same JVM), the consumer that reads committed offsets, and the
 * stamps this JVM saw commit. The JVM counterpart of eos/_kafka/_pool.py; bounded, closed at shutdown.
 */
package eos.spark;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;

/** The JVM's kept producers (least recently used closed beyond a bound), consumers and proven stamps. */
final class Producers {
  private static final int MAX_PROVEN = 10_000;
  private static final LinkedHashMap<String, Kept> KEPT = new LinkedHashMap<>(16, 0.75f, true);
  private static final Map<String, KafkaConsumer<byte[], byte[]>> CONSUMERS = new LinkedHashMap<>();
  private static final LinkedHashMap<String, String> PROVEN = new LinkedHashMap<>(16, 0.75f, true);
  private static final Map<String, Admin> ADMINS = new LinkedHashMap<>();
  private static final Map<String, KafkaProducer<byte[], byte[]>> SHARED = new LinkedHashMap<>();
  private static final Set<String> WRITABLE = new HashSet<>();

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(Producers::closeAll, "eos-producers-close"));
  }

  private Producers() {}

  /** A kept producer and the stamp of its last commit. */
  static final class Kept {
    final KafkaProducer<byte[], byte[]> producer;
    final String stamp;

    Kept(KafkaProducer<byte[], byte[]> producer, String stamp) {
      this.producer = producer;
      this.stamp = stamp;
    }
  }

  /** The kept producer of `tid`, taken (no other task may use it meanwhile), or null. */
  static synchronized Kept take(String tid) {
    return KEPT.remove(tid);
  }

  /** Keep `producer`, which committed `stamp` last and has no transaction open; beyond `max` producers
   * the least recently used is closed. */
  static void keep(String tid, KafkaProducer<byte[], byte[]> producer, String stamp, int max) {
    List<Kept> closing = new ArrayList<>();
    synchronized (Producers.class) {
      Kept old = KEPT.put(tid, new Kept(producer, stamp));
      if (old != null && old.producer != producer) {
        closing.add(old);
      }
      Iterator<Map.Entry<String, Kept>> eldest = KEPT.entrySet().iterator();
      while (KEPT.size() > Math.max(1, max) && eldest.hasNext()) {
        closing.add(eldest.next().getValue());
        eldest.remove();
      }
    }
    for (Kept k : closing) {
      k.producer.close(Duration.ZERO);
    }
  }

  /** The JVM's one producer for these settings without a transactional.id (at_least_once): a
   * KafkaProducer is thread-safe, and nothing of a transaction is its own. */
  static synchronized KafkaProducer<byte[], byte[]> shared(Map<String, Object> settings) {
    return SHARED.computeIfAbsent(settings.toString(), k -> {
      Properties props = new Properties();
      props.putAll(settings);
      return new KafkaProducer<>(props);
    });
  }

  /** The consumer that reads committed offsets for these settings (one per group), made once. */
  static synchronized KafkaConsumer<byte[], byte[]> consumer(Map<String, Object> settings) {
    return CONSUMERS.computeIfAbsent(settings.toString(), k -> {
      Properties props = new Properties();
      props.putAll(settings);
      return new KafkaConsumer<>(props);
    });
  }

  /** Why this principal cannot write `topic` (its kind: "missing", "denied", "no_write"; and the client's
   * words), or null where it can: asked of the admin client once per JVM and topic, since a producer's
   * metadata request for a missing topic would create it on a broker that auto-creates topics, and a
   * refused write fails the transaction (eos/_kafka/_topics.py). */
  static String[] unwritable(Map<String, Object> client, String topic, long timeoutMs) {
    String known = client.toString() + "\u0000" + topic;
    Admin admin;
    synchronized (Producers.class) {
      if (WRITABLE.contains(known)) {
        return null;
      }
      admin = ADMINS.computeIfAbsent(client.toString(), k -> {
        Properties props = new Properties();
        props.putAll(client);
        return Admin.create(props);
      });
    }
    TopicDescription found;
    try {
      found =
          admin
              .describeTopics(
                  Collections.singleton(topic), new DescribeTopicsOptions().includeAuthorizedOperations(true))
              .allTopicNames()
              .get(timeoutMs, TimeUnit.MILLISECONDS)
              .get(topic);
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof UnknownTopicOrPartitionException) {
        return new String[] {"missing", String.valueOf(cause.getMessage())};
      }
      if (cause instanceof TopicAuthorizationException) {
        return new String[] {"denied", String.valueOf(cause.getMessage())};
      }
      throw new KafkaException("looking up output topic '" + topic + "'", cause);
    } catch (InterruptedException | java.util.concurrent.TimeoutException e) {
      throw new org.apache.kafka.common.errors.TimeoutException("looking up output topic '" + topic + "'", e);
    }
    Set<AclOperation> operations = found.authorizedOperations();
    if (operations != null && !operations.contains(AclOperation.WRITE) && !operations.contains(AclOperation.ALL)) {
      return new String[] {"no_write", ""};
    }
    synchronized (Producers.class) {
      WRITABLE.add(known);
    }
    return null;
  }

  /** This JVM saw the transaction stamped `stamp` commit, or read it all back. */
  static synchronized void proven(String tid, String stamp) {
    PROVEN.put(tid, stamp);
    Iterator<String> eldest = PROVEN.keySet().iterator();
    while (PROVEN.size() > MAX_PROVEN && eldest.hasNext()) {
      eldest.next();
      eldest.remove();
    }
  }

  static synchronized boolean isProven(String tid, String stamp) {
    return stamp != null && stamp.equals(PROVEN.get(tid));
  }

  private static void closeAll() {
    List<Kept> kept;
    List<KafkaConsumer<byte[], byte[]>> consumers;
    List<Admin> admins;
    synchronized (Producers.class) {
      admins = new ArrayList<>(ADMINS.values());
      ADMINS.clear();
      kept = new ArrayList<>(KEPT.values());
      KEPT.clear();
      for (KafkaProducer<byte[], byte[]> p : SHARED.values()) {
        kept.add(new Kept(p, null));
      }
      SHARED.clear();
      consumers = new ArrayList<>(CONSUMERS.values());
      CONSUMERS.clear();
    }
    for (Admin a : admins) {
      try {
        a.close(Duration.ofSeconds(1));
      } catch (RuntimeException ignored) {
        // the JVM is going
      }
    }
    for (Kept k : kept) {
      try {
        k.producer.close(Duration.ofSeconds(1));
      } catch (RuntimeException ignored) {
        // the JVM is going: nothing is open on a kept producer
      }
    }
    for (KafkaConsumer<byte[], byte[]> c : consumers) {
      synchronized (c) {
        try {
          c.close(Duration.ofSeconds(1));
        } catch (RuntimeException ignored) {
          // as above
        }
      }
    }
  }
}
