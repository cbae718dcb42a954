import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/** bench/probes/java_coordinator_wait.py runs it: one line per fresh producer, "backoff init offsets"
 * in ms (initTransactions; the first sendOffsetsToTransaction, for a new group). */
public class CoordinatorWait {
  public static void main(String[] args) {
    String bootstrap = args[0];
    String topic = args[1];
    int rounds = Integer.parseInt(args[2]);
    for (int round = 0; round < rounds; round++) {
      for (int i = 3; i < args.length; i++) {
        String run = UUID.randomUUID().toString();
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("transactional.id", "probe-" + run);
        props.put("retry.backoff.ms", args[i]);
        props.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        props.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
          long t0 = System.nanoTime();
          producer.initTransactions();
          long t1 = System.nanoTime();
          producer.beginTransaction();
          producer.send(new ProducerRecord<>(topic, 0, null, new byte[100]));
          producer.flush();
          long t2 = System.nanoTime();
          Map<TopicPartition, OffsetAndMetadata> offsets =
              Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(1));
          producer.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata("probe-" + run));
          long t3 = System.nanoTime();
          producer.commitTransaction();
          System.out.printf("%s %.1f %.1f%n", args[i], (t1 - t0) / 1e6, (t3 - t2) / 1e6);
        }
      }
    }
  }
}
