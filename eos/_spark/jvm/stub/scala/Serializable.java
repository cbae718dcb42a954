/*
 * Compile-time stand-in for Scala 2.12's scala.Serializable (Scala 2.13 has none: there it is an alias
 * of java.io.Serializable), so that Placement.Scala212 compiles against Spark 4's jars. Not in the jar:
 * on Spark 3.5 the real one is on the classpath.
 */
package scala;

public interface Serializable extends java.io.Serializable {}
