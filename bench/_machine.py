"""What `bench.json` records of the machine and the software a run measured: cores, memory, CPU, the
versions of Python, PySpark, the Kafka clients, Java and Quix Streams, and eos's git commit."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path


def machine_facts() -> dict:
    import confluent_kafka
    import pyspark

    facts = {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "pyspark": pyspark.__version__,
        "confluent_kafka": confluent_kafka.version(),
        "librdkafka": confluent_kafka.libversion()[0],
        "kafka_broker": "4.1.1 (KRaft, single node, local jars)",
        "eos": _git_head(),
    }
    try:
        with open("/proc/meminfo") as f:
            facts["memory_gib"] = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
        with open("/proc/cpuinfo") as f:
            facts["cpu"] = next(
                (ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None
            )
    except OSError:
        pass
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
        facts["java"] = java
    except (OSError, IndexError):
        pass
    try:
        from importlib.metadata import version

        facts["quixstreams"] = version("quixstreams")
    except Exception:  # noqa: BLE001 - not installed
        pass
    return facts


def _git_head() -> str | None:
    try:
        return subprocess.run(
            ["git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return None
