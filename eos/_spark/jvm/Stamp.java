/*
 * eos's offset stamp, written and read as the Python path writes and reads it (eos/_kafka/_offsets.py,
 * eos/_kafka/_witness.py): either path must take the other's committed offsets as its own.
 */
package eos.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.common.TopicPartition;

/** The metadata eos commits with an input offset: who committed it, since where, and its witnesses. */
final class Stamp {
  static final String VERSION = "eos/1";
  static final String WITNESSES = "w";
  static final int METADATA_LIMIT = 4000;
  static final int BUDGET = 3000;

  private Stamp() {}

  /** The stamp of a transaction of `appId` writing to `out` that began at `since` (null: nothing before). */
  static String of(String appId, String out, Long since, Map<TopicPartition, Long> witnesses) {
    StringBuilder own = new StringBuilder(VERSION).append(";app=").append(appId).append(";out=").append(out);
    if (since != null) {
      own.append(";since=").append(since);
    }
    if (!witnesses.isEmpty()) {
      int room = METADATA_LIMIT - own.length() - ";w=;unwitnessed=000000".length();
      int budget = Math.max(0, Math.min(BUDGET, room));
      TreeMap<String, TreeMap<Integer, Long>> byTopic = new TreeMap<>();
      for (Map.Entry<TopicPartition, Long> w : witnesses.entrySet()) {
        byTopic.computeIfAbsent(w.getKey().topic(), k -> new TreeMap<>()).put(w.getKey().partition(), w.getValue());
      }
      List<String> parts = new ArrayList<>();
      int size = 0;
      int leftOut = 0;
      for (Map.Entry<String, TreeMap<Integer, Long>> entry : byTopic.entrySet()) {
        List<String> kept = new ArrayList<>();
        for (Map.Entry<Integer, Long> p : entry.getValue().entrySet()) {
          String item = p.getKey() + "@" + p.getValue();
          int extra = item.length() + 1 + (kept.isEmpty() ? entry.getKey().length() + 2 : 0);
          if (size + extra > budget) {
            leftOut++; // a later, shorter item may still fit
            continue;
          }
          kept.add(item);
          size += extra;
        }
        if (!kept.isEmpty()) {
          parts.add(entry.getKey() + ":" + String.join("+", kept));
        }
      }
      own.append(";").append(WITNESSES).append("=").append(String.join("|", parts));
      if (leftOut > 0) {
        own.append(";unwitnessed=").append(leftOut);
      }
    }
    return own.toString();
  }

  /** The committed metadata without the NUL terminator confluent-kafka (the Python path) commits. */
  static String clean(String metadata) {
    while (metadata != null && metadata.endsWith("\0")) {
      metadata = metadata.substring(0, metadata.length() - 1);
    }
    return metadata;
  }

  /** A stamp's fields, or null where `metadata` is no eos stamp. */
  static Map<String, String> fields(String metadata) {
    metadata = clean(metadata);
    if (metadata == null || !metadata.startsWith(VERSION + ";")) {
      return null;
    }
    Map<String, String> found = new HashMap<>();
    String[] parts = metadata.split(";", -1);
    for (int i = 1; i < parts.length; i++) {
      int eq = parts[i].indexOf('=');
      if (eq >= 0) {
        found.put(parts[i].substring(0, eq), parts[i].substring(eq + 1));
      }
    }
    return found;
  }

  /** Committed by this app for this output, or by `eos offsets reset` for this app. */
  static boolean isOwn(String appId, String out, String metadata) {
    Map<String, String> found = fields(metadata);
    if (found == null || !appId.equals(found.get("app"))) {
      return false;
    }
    return "cli".equals(found.get("by")) || out.equals(found.get("out"));
  }

  /** Where `eos offsets reset` stamped the offset: the offset it replaced (-1: not known); else null. */
  static Long resetFrom(String metadata) {
    Map<String, String> found = fields(metadata);
    if (found == null || !"cli".equals(found.get("by"))) {
      return null;
    }
    String was = found.get("was");
    try {
      return was == null ? -1L : Long.parseLong(was);
    } catch (NumberFormatException e) {
      return -1L;
    }
  }

  /** The witnesses a stamp names, by (topic, partition). */
  static Map<TopicPartition, Long> witnesses(String metadata) {
    Map<TopicPartition, Long> out = new HashMap<>();
    Map<String, String> found = fields(metadata);
    String field = found == null ? null : found.get(WITNESSES);
    if (field == null || field.isEmpty()) {
      return out;
    }
    for (String group : field.split("\\|")) {
      int colon = group.lastIndexOf(':');
      if (colon < 0) {
        continue;
      }
      String topic = group.substring(0, colon);
      for (String item : group.substring(colon + 1).split("\\+")) {
        int at = item.indexOf('@');
        if (at > 0) {
          out.put(
              new TopicPartition(topic, Integer.parseInt(item.substring(0, at))),
              Long.parseLong(item.substring(at + 1)));
        }
      }
    }
    return out;
  }
}
