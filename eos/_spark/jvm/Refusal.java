/*
 * An eos error found in the JVM writer, handed to the driver as data: the error's name and the fields its
 * message is built from. The driver (eos/_spark/_jvm_writer.py) raises the Python path's own error with
 * the Python path's own words, so one message serves both paths.
 */
package eos.spark;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.LinkedHashMap;
import java.util.Map;

/** The JVM writer's refusal: `eos-refusal:{"error": "<eos.errors class>", ...fields}` as the message of an
 * exception of a class every JVM has (the driver's task scheduler reads a task's exception with its own
 * class loader, which does not see eos's jar: an exception of eos's class would reach it as "UnknownReason"). */
final class Refusal {
  static final String MARK = "eos-refusal:";

  private Refusal() {}

  /** The refusal `error` (an eos.errors class name) with its fields, in pairs: name, value, ... */
  static IllegalStateException of(String error, Object... fields) {
    return of(error, null, fields);
  }

  static IllegalStateException of(String error, Throwable cause, Object... fields) {
    Map<String, Object> json = new LinkedHashMap<>();
    json.put("error", error);
    for (int i = 0; i + 1 < fields.length; i += 2) {
      json.put((String) fields[i], fields[i + 1]);
    }
    try {
      return new IllegalStateException(MARK + new ObjectMapper().writeValueAsString(json), cause);
    } catch (JsonProcessingException e) {
      return new IllegalStateException(MARK + "{\"error\": \"" + error + "\"}", cause);
    }
  }
}
