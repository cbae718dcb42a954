/*
 * The crash points of eos/_crash.py in the JVM writer, armed by the same variables (EOS_CRASH_AT,
 * EOS_PAUSE_AT, EOS_SIGNAL_AT, EOS_CRASH_ONCE_DIR): SIGKILL (or SIGSTOP) of this very process at a protocol
 * step, so that every fault test of the Python path makes the same fault happen on the JVM path. Unarmed,
 * a point is a constant-time no-op.
 */
package eos.spark;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.Set;

/** Named crash points for fault-injection tests (see eos/_crash.py). */
final class Crash {
  private static final Set<String> ARMED = armed("EOS_CRASH_AT");
  private static final Set<String> PAUSE = armed("EOS_PAUSE_AT");
  private static final Set<String> SIGNAL = armed("EOS_SIGNAL_AT");
  private static final String ONCE_DIR = System.getenv("EOS_CRASH_ONCE_DIR");
  private static final long SIGNAL_WAIT_MS = 120_000;

  private Crash() {}

  static void point(String name) {
    if (ARMED.isEmpty() && PAUSE.isEmpty() && SIGNAL.isEmpty()) {
      return;
    }
    if (SIGNAL.contains(name) && ONCE_DIR != null && firstTime("reached-" + name)) {
      File go = new File(ONCE_DIR, "go-" + name);
      long deadline = System.currentTimeMillis() + SIGNAL_WAIT_MS;
      while (!go.exists() && System.currentTimeMillis() < deadline) {
        sleep(10);
      }
    }
    if (PAUSE.contains(name) && firstTime("paused-" + name)) {
      signal("STOP");
    }
    if (ARMED.contains(name) && firstTime("crashed-" + name)) {
      signal("KILL");
      Runtime.getRuntime().halt(137); // where kill is not there: as abrupt, no shutdown hook runs
    }
  }

  private static Set<String> armed(String variable) {
    String value = System.getenv(variable);
    if (value == null || value.isEmpty()) {
      return Collections.emptySet();
    }
    Set<String> points = new HashSet<>(Arrays.asList(value.split(",")));
    points.remove("");
    return points;
  }

  /** With EOS_CRASH_ONCE_DIR: true for exactly one caller across all processes. */
  private static boolean firstTime(String marker) {
    if (ONCE_DIR == null) {
      return true;
    }
    File file = new File(ONCE_DIR, marker);
    try {
      if (!file.createNewFile()) {
        return false;
      }
      try (FileOutputStream out = new FileOutputStream(file)) {
        out.write(pid().getBytes(StandardCharsets.UTF_8));
      }
      return true;
    } catch (IOException e) {
      return false;
    }
  }

  private static String pid() {
    String name = ManagementFactory.getRuntimeMXBean().getName(); // "<pid>@<host>" (Java 8 has no pid())
    return name.substring(0, name.indexOf('@'));
  }

  private static void signal(String which) {
    try {
      new ProcessBuilder("kill", "-" + which, pid()).inheritIO().start().waitFor();
    } catch (IOException e) {
      // no kill command: the caller halts instead (a pause is then skipped)
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
