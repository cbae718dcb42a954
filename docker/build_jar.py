"""Compile eos's JVM classes (eos/_spark/jvm/*.java) into the jar the wheel ships, for Java 8 and up.

Run by the Python whose PySpark the classes compile against (its `pyspark/jars`), with the Kafka client
the JVM writer uses on the class path: `--classpath` (the jars `make setup` fetched for Spark's Kafka
connector), or `--kafka-clients VERSION`, which fetches that one jar from Maven Central into `--cache`,
checked against Maven Central's SHA-1. Needs a JDK's `javac` and `jar`, and nothing else than the
standard library:

    python docker/build_jar.py eos/_spark/jvm/eos-placement.jar --classpath '.cache/spark-jars/4.0.0/*'
    python docker/build_jar.py eos/_spark/jvm/eos-placement.jar --kafka-clients 3.9.0 --cache .cache/jars

The classes a PySpark lacks the API for are left out: the Connect plugin without a Spark Connect server
jar, `format("eos")`'s provider before PySpark 4.0 (no Python data sources)."""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "eos" / "_spark" / "jvm"
MAVEN = "https://repo1.maven.org/maven2/org/apache/kafka/kafka-clients"


def kafka_clients(version: str, cache: Path) -> Path:
    """kafka-clients-<version>.jar in `cache`, fetched once and checked against its published SHA-1."""
    jar = cache / f"kafka-clients-{version}.jar"
    if jar.exists():
        return jar
    cache.mkdir(parents=True, exist_ok=True)
    url = f"{MAVEN}/{version}/kafka-clients-{version}.jar"
    print(f"   fetching {url}", flush=True)
    with urllib.request.urlopen(url, timeout=120) as response:
        data = response.read()
    with urllib.request.urlopen(url + ".sha1", timeout=60) as response:
        expected = response.read().decode().split()[0]
    if hashlib.sha1(data).hexdigest() != expected:  # noqa: S324 - Maven Central publishes SHA-1
        raise SystemExit(f"{url}: SHA-1 {hashlib.sha1(data).hexdigest()} is not the published {expected}")  # noqa: S324
    partial = jar.with_suffix(".part")
    partial.write_bytes(data)
    partial.replace(jar)
    return jar


def sources(pyspark_jars: Path, version: str) -> list[Path]:
    found = sorted(SOURCES.glob("*.java"))
    if not list(pyspark_jars.glob("spark-connect_*.jar")):
        print(f"   (PySpark {version} has no Spark Connect server: no Connect plugin in the jar)")
        found = [p for p in found if p.name != "ConnectPlugin.java"]
    if int(version.split(".")[0]) < 4:
        print(f'   (PySpark {version} has no Python data sources: no format("eos") provider in the jar)')
        found = [p for p in found if p.name not in ("DefaultSource.java", "ServerDriver.java")]
    return [*found, SOURCES / "stub" / "scala" / "Serializable.java"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--classpath", help="more class path entries (the Kafka client's jar among them)")
    parser.add_argument("--kafka-clients", help="fetch this kafka-clients version from Maven Central instead")
    parser.add_argument("--cache", type=Path, default=ROOT / ".cache" / "jars")
    args = parser.parse_args()
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    extra = args.classpath or str(kafka_clients(args.kafka_clients, args.cache))
    with tempfile.TemporaryDirectory() as classes:
        javac = ["javac", "--release", "8", "-nowarn", "-Xlint:-options", "-cp", f"{jars}/*:{extra}"]
        subprocess.run([*javac, "-d", classes, *map(str, sources(jars, pyspark.__version__))], check=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["jar", "cf", str(args.out), "-C", classes, "eos"], check=True)


if __name__ == "__main__":
    sys.exit(main())
