/*
 * The Python process that routes a Spark Connect server's format("eos") streams (Spark 4.0+). On a classic
 * driver, eos.register routes them from the driver's own Python process. A Connect server has none: the
 * first stream of a session whose client registered eos starts one, a Python process of eos attached to
 * this JVM over Py4J as spark-submit attaches a Python application (eos/_format_server.py). It registers
 * its Router here and runs the foreachBatch sink's driver side for every JVM-route batch of the server, so
 * no batch pays a Python process of its own. It exits with this JVM (its stdin closes); one that died is
 * started again by the next stream.
 */
package eos;

import java.io.IOException;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.spark.SparkConf;
import org.apache.spark.api.python.Py4JServer;
import org.apache.spark.api.python.PythonUtils;
import org.apache.spark.sql.SparkSession;

final class ServerDriver {
  /** How long the Python process may take to attach and register (imports PySpark and eos). */
  private static final long START_SECONDS = 120;

  private static Process process;
  private static Py4JServer gateway;
  private static DefaultSource.Router router;
  private static boolean hooked;

  private ServerDriver() {}

  /** Called by the Python process once attached: its Router. */
  public static synchronized void registered(DefaultSource.Router r) {
    router = r;
    ServerDriver.class.notifyAll();
  }

  /** The running process's Router, the process started where none runs. */
  static synchronized DefaultSource.Router router(SparkSession session) {
    if (router != null && process != null && process.isAlive()) {
      return router;
    }
    stop();
    SparkConf conf = session.sparkContext().getConf();
    gateway = new Py4JServer(conf);
    gateway.start();
    ProcessBuilder builder = new ProcessBuilder(python(conf), "-m", "eos._format_server");
    Map<String, String> env = builder.environment();
    env.put("PYSPARK_GATEWAY_PORT", Integer.toString(gateway.getListeningPort()));
    env.put("PYSPARK_GATEWAY_SECRET", gateway.secret());
    env.put("PYTHONUNBUFFERED", "YES");
    String path = PythonUtils.sparkPythonPath(); // PySpark where the server is a Spark distribution
    String own = env.get("PYTHONPATH");
    env.put("PYTHONPATH", own == null || own.isEmpty() ? path : path + java.io.File.pathSeparator + own);
    builder.redirectOutput(ProcessBuilder.Redirect.INHERIT);
    builder.redirectError(ProcessBuilder.Redirect.INHERIT);
    try {
      process = builder.start(); // its stdin stays open while this JVM lives
    } catch (IOException e) {
      stop();
      throw new IllegalStateException(
          "format(\"eos\") could not start eos's Python process on this Spark Connect server ("
              + builder.command().get(0)
              + "; spark.pyspark.driver.python or spark.pyspark.python names it): "
              + e.getMessage(),
          e);
    }
    if (!hooked) {
      Runtime.getRuntime().addShutdownHook(new Thread(ServerDriver::stopNow, "eos-server-driver-stop"));
      hooked = true;
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(START_SECONDS);
    try {
      while (router == null && process.isAlive() && System.nanoTime() < deadline) {
        ServerDriver.class.wait(1000);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (router == null) {
      String how = process.isAlive() ? "did not register in " + START_SECONDS + " s" : "exited with code "
          + process.exitValue();
      stop();
      throw new IllegalStateException(
          "format(\"eos\"): eos's Python process on this Spark Connect server "
              + how
              + " (its output is in the server's log; eos must be importable by the Python that"
              + " spark.pyspark.driver.python or spark.pyspark.python names)");
    }
    return router;
  }

  /** The running process's Router, or null. */
  static synchronized DefaultSource.Router current() {
    return router != null && process != null && process.isAlive() ? router : null;
  }

  /** The Python a Spark application's driver runs, as spark-submit chooses it. */
  private static String python(SparkConf conf) {
    String exec = conf.get("spark.pyspark.driver.python", conf.get("spark.pyspark.python", null));
    if (exec == null) {
      exec = System.getenv("PYSPARK_DRIVER_PYTHON");
    }
    if (exec == null) {
      exec = System.getenv("PYSPARK_PYTHON");
    }
    return exec == null ? "python3" : exec;
  }

  private static synchronized void stop() {
    stopNow();
  }

  private static void stopNow() {
    router = null;
    if (process != null) {
      process.destroy();
      process = null;
    }
    if (gateway != null) {
      gateway.shutdown();
      gateway = null;
    }
  }
}
