/*
 * The Python process that routes a Spark Connect server's format("eos") streams (Spark 4.0+). On a classic
 * driver, eos.register routes them from the driver's own Python process. A Connect server has none: the
 * first stream of a session whose client registered eos starts one, a Python process of eos attached to
 * this JVM over Py4J as spark-submit attaches a Python application (eos/_format_server.py). It registers
 * its Router here and runs the foreachBatch sink's driver side for every JVM-route batch of the server, so
 * no batch pays a Python process of its own. It exits with this JVM (its stdin closes); one that died is
 * started again at the next batch or stream that needs it.
 */
package eos;

import java.io.IOException;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.api.python.Py4JServer;
import org.apache.spark.api.python.PythonUtils;
import org.apache.spark.sql.SparkSession;

public final class ServerDriver {
  /** How long the Python process may take to attach and register (imports PySpark and eos). */
  private static final long START_SECONDS = 120;

  /** Held while a process starts: a stream that needs one meanwhile waits for it, and never stops it. */
  private static final Object STARTING = new Object();

  private static volatile Process process;
  private static volatile Py4JServer gateway;
  private static volatile SparkContext context;
  /** Names the process now starting: a registration from one stopped before it is ignored. */
  private static volatile String token;

  private static volatile DefaultSource.Router router;
  private static boolean hooked;

  private ServerDriver() {}

  /** Called by the Python process once attached: its Router, with the token it was started with. */
  public static void registered(String from, DefaultSource.Router r) {
    if (from != null && from.equals(token)) {
      router = r;
    }
  }

  /** The server's SparkContext, for the Python process to attach to. */
  public static SparkContext context() {
    return context;
  }

  /** The running process's Router, the process started where none runs. */
  static DefaultSource.Router router(SparkSession session) {
    synchronized (STARTING) {
      DefaultSource.Router r = router;
      Process p = process;
      if (r != null && p != null && p.isAlive()) {
        return r;
      }
      stop();
      return start(session);
    }
  }

  private static DefaultSource.Router start(SparkSession session) {
    context = session.sparkContext();
    SparkConf conf = context.getConf();
    String python = python(conf);
    token = UUID.randomUUID().toString();
    gateway = new Py4JServer(conf);
    startClean(gateway);
    ProcessBuilder builder = new ProcessBuilder(python, "-m", "eos._format_server");
    Map<String, String> env = builder.environment();
    env.put("PYSPARK_GATEWAY_PORT", Integer.toString(gateway.getListeningPort()));
    env.put("PYSPARK_GATEWAY_SECRET", gateway.secret());
    env.put("EOS_SERVER_DRIVER_TOKEN", token);
    env.put("PYTHONUNBUFFERED", "YES");
    env.remove("SPARK_CONNECT_MODE_ENABLED"); // the process is a classic driver of this JVM's context
    env.remove("SPARK_REMOTE");
    String path = PythonUtils.sparkPythonPath(); // PySpark where the server is a Spark distribution
    String own = env.get("PYTHONPATH");
    env.put("PYTHONPATH", own == null || own.isEmpty() ? path : path + java.io.File.pathSeparator + own);
    builder.redirectOutput(ProcessBuilder.Redirect.INHERIT);
    builder.redirectError(ProcessBuilder.Redirect.INHERIT);
    Process p;
    try {
      p = builder.start(); // its stdin stays open while this JVM lives
    } catch (IOException e) {
      stop();
      throw new IllegalStateException(
          "format(\"eos\") could not start eos's Python process on this Spark Connect server (" + python
              + "): " + e.getMessage(),
          e);
    }
    process = p;
    if (!hooked) {
      Runtime.getRuntime().addShutdownHook(new Thread(ServerDriver::stop, "eos-server-driver-stop"));
      hooked = true;
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(START_SECONDS);
    try {
      while (router == null && p.isAlive() && System.nanoTime() < deadline) {
        Thread.sleep(50);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      stop();
      throw new IllegalStateException("format(\"eos\"): interrupted while eos's Python process started");
    }
    DefaultSource.Router r = router;
    if (r == null) {
      String how = p.isAlive() ? "did not register in " + START_SECONDS + " s" : "exited with code "
          + p.exitValue();
      stop();
      throw new IllegalStateException(
          "format(\"eos\"): eos's Python process on this Spark Connect server ("
              + python
              + ") "
              + how
              + "; its output is in the server's log (eos must be importable by the Python that"
              + " spark.pyspark.python or PYSPARK_PYTHON names)");
    }
    return r;
  }

  /** Starts the gateway from a thread of its own: Py4J's threads would otherwise inherit the calling
   * Connect operation's (its session, job tags and group, class loader) and keep them. */
  private static void startClean(Py4JServer server) {
    RuntimeException[] failed = new RuntimeException[1];
    Thread starter =
        new Thread(
            () -> {
              try {
                context.setLocalProperties(new Properties());
                SparkSession.clearActiveSession();
                server.start();
              } catch (RuntimeException e) {
                failed[0] = e;
              }
            },
            "eos-server-driver-gateway");
    starter.setContextClassLoader(ServerDriver.class.getClassLoader());
    starter.start();
    try {
      starter.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (failed[0] != null) {
      throw failed[0];
    }
  }

  /** The Python a server's foreachBatch worker runs (the one that already imports eos there). */
  private static String python(SparkConf conf) {
    String exec = conf.get("spark.pyspark.python", null);
    if (exec == null) {
      exec = System.getenv("PYSPARK_PYTHON");
    }
    if (exec == null) {
      exec = System.getenv("PYSPARK_DRIVER_PYTHON");
    }
    return exec == null ? "python3" : exec;
  }

  private static void stop() {
    router = null;
    token = null;
    Process p = process;
    process = null;
    if (p != null) {
      p.destroy();
    }
    Py4JServer g = gateway;
    gateway = null;
    if (g != null) {
      try {
        g.shutdown();
      } catch (RuntimeException e) { // already down
      }
    }
  }
}
