/*
 * What every task of one batch of the JVM writer shares, as eos/_spark/_jvm_writer.py hands it over (JSON):
 * the app's names and settings, where each role's column is, where the Kafka source read each Spark
 * partition, and the Kafka client's settings.
 */
package eos.spark;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.unsafe.types.UTF8String;

/** A batch's plan for the JVM writer. */
final class Spec {
  final String appId;
  final String group;
  final boolean exactlyOnce;
  final String out;
  final String outputTopic;
  final String restoreGroup;
  final long batchId;
  final long commitEvery;
  final long commitIntervalMs;
  final long timeoutMs;
  final long transactionTimeoutMs;
  final boolean acceptForeign;
  final int maxProducers;
  final int key;
  final int value;
  final int headers;
  final int topic;
  final int partition;
  final int offset;
  final int readIn;
  final int outTopic;
  final int outPartition;
  final int outTimestamp;
  final boolean keyIsString;
  final boolean valueIsString;
  /** "timestamp" (microseconds since the epoch), "bigint" or "int" (milliseconds), or null */
  final String timestampKind;
  /** per Spark partition of the source, [topic, partition, start, end), or null where not known */
  final Source[] sources;
  /** on_error "dead_letter": where bad records go and what their dead letters say; null: "fail" */
  final DeadLetters deadLetters;
  final Map<String, Object> client = new HashMap<>();
  final Map<String, Object> producer = new HashMap<>();
  final Map<String, Object> consumer = new HashMap<>();

  /** The dead letters' topic and bound, and their headers' names and words, as the Python path's
   * (eos/_core/_deadletter.py, eos/_kafka/_collector.py: the driver renders its messages with @@-marked
   * places this fills). */
  static final class DeadLetters {
    final String topic;
    final long max;
    final String exception;
    final String kind;
    final String exceptionHeader;
    final String kindHeader;
    final String messageHeader;
    final String topicHeader;
    final String partitionHeader;
    final String offsetHeader;
    final String appIdHeader;
    final String batchIdHeader;
    final String valueBytesHeader;
    private final String refused;
    private final String before1970;
    final Map<String, String> words;

    @SuppressWarnings("unchecked")
    DeadLetters(Map<String, Object> json) {
      topic = (String) json.get("topic");
      max = number(json, "max");
      exception = (String) json.get("exception");
      kind = (String) json.get("kind");
      Map<String, String> names = (Map<String, String>) json.get("headers");
      exceptionHeader = names.get("exception");
      kindHeader = names.get("kind");
      messageHeader = names.get("message");
      topicHeader = names.get("topic");
      partitionHeader = names.get("partition");
      offsetHeader = names.get("offset");
      appIdHeader = names.get("app_id");
      batchIdHeader = names.get("batch_id");
      valueBytesHeader = names.get("value_bytes");
      refused = (String) json.get("refused");
      before1970 = (String) json.get("before_1970");
      words = (Map<String, String>) json.get("words");
    }

    /** The message of an output to `out` refused for `reason`. */
    String refused(String out, String reason) {
      return refused.replace("@@out@@", out).replace("@@reason@@", reason);
    }

    /** The message of an output to `out` whose timestamp is before 1970. */
    String before1970(String out, long timestamp) {
      return before1970.replace("@@out@@", out).replace("@@timestamp@@", String.valueOf(timestamp));
    }
  }

  /** One Spark partition as the Kafka source read it. */
  static final class Source {
    final String topic;
    /** `topic` as Spark's rows hold it, compared with each row's without making a String of it */
    final UTF8String utf8;
    final int partition;
    final long start;
    final long end;

    Source(String topic, int partition, long start, long end) {
      this.topic = topic;
      this.utf8 = UTF8String.fromString(topic);
      this.partition = partition;
      this.start = start;
      this.end = end;
    }
  }

  @SuppressWarnings("unchecked")
  static Spec parse(String json) throws IOException {
    return new Spec(new ObjectMapper().readValue(json, Map.class));
  }

  @SuppressWarnings("unchecked")
  private Spec(Map<String, Object> json) {
    appId = (String) json.get("app_id");
    group = (String) json.get("group");
    exactlyOnce = Boolean.TRUE.equals(json.get("exactly_once"));
    out = (String) json.get("out");
    outputTopic = (String) json.get("output_topic");
    restoreGroup = (String) json.get("restore_group");
    batchId = number(json, "batch_id");
    commitEvery = number(json, "commit_every");
    commitIntervalMs = number(json, "commit_interval_ms");
    timeoutMs = number(json, "operation_timeout_ms");
    transactionTimeoutMs = number(json, "transaction_timeout_ms");
    acceptForeign = Boolean.TRUE.equals(json.get("accept_foreign_offsets"));
    maxProducers = (int) number(json, "max_producers");
    Map<String, Object> columns = (Map<String, Object>) json.get("columns");
    key = index(columns, "key");
    value = index(columns, "value");
    headers = index(columns, "headers");
    topic = index(columns, "topic");
    partition = index(columns, "partition");
    offset = index(columns, "offset");
    readIn = index(columns, "read_in");
    outTopic = index(columns, "out_topic");
    outPartition = index(columns, "out_partition");
    outTimestamp = index(columns, "out_timestamp");
    keyIsString = Boolean.TRUE.equals(json.get("key_is_string"));
    valueIsString = Boolean.TRUE.equals(json.get("value_is_string"));
    timestampKind = (String) json.get("timestamp_kind");
    List<List<Object>> read = (List<List<Object>>) json.get("sources");
    if (read == null) {
      sources = null;
    } else {
      sources = new Source[read.size()];
      for (int i = 0; i < sources.length; i++) {
        List<Object> r = read.get(i);
        sources[i] =
            new Source(
                (String) r.get(0),
                ((Number) r.get(1)).intValue(),
                ((Number) r.get(2)).longValue(),
                ((Number) r.get(3)).longValue());
      }
    }
    Map<String, Object> letters = (Map<String, Object>) json.get("dead_letters");
    deadLetters = letters == null ? null : new DeadLetters(letters);
    client.putAll((Map<String, Object>) json.get("client"));
    producer.putAll(client);
    producer.putAll((Map<String, Object>) json.get("producer"));
    producer.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
    producer.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
    consumer.putAll(client);
    consumer.put("group.id", group);
    consumer.put("isolation.level", "read_committed");
    consumer.put("enable.auto.commit", "false");
    consumer.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
    consumer.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
  }

  /** Where the Kafka source began reading topic/partition in this batch (null: not known). */
  Long readStart(String t, int p) {
    if (sources == null) {
      return null;
    }
    Long start = null;
    for (Source s : sources) {
      if (s.partition == p && s.topic.equals(t) && (start == null || s.start < start)) {
        start = s.start;
      }
    }
    return start;
  }

  private static long number(Map<String, Object> json, String name) {
    Object v = json.get(name);
    if (!(v instanceof Number)) {
      throw new IllegalArgumentException("the JVM writer's plan lacks " + name);
    }
    return ((Number) v).longValue();
  }

  private static int index(Map<String, Object> columns, String name) {
    Object at = columns.get(name);
    return at == null ? -1 : ((Number) at).intValue();
  }
}
