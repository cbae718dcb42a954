"""`make matrix`: eos on the other versions it supports, each combination in a venv of its own.

`make test` runs the default combination (constraints.txt: Python 3.11, PySpark 4.0.0, Kafka 4.1.1).
Here each combination below gets a venv with its Python and pinned libraries (eos installed from the
checkout), Spark's Kafka connector for its Spark (Scala 2.12 or 2.13, `eos._spark._cache.maven_args`), a
broker of its Kafka version (`EOS_BROKER_VERSION`), and then runs the unit tests and the e2e tests that
prove the guarantee: driver SIGKILLs mid-stream, the stateful counts under kills, `read_stream`'s
read_committed source, the JVM data path, `format("eos")` (Spark 4.0+) and real-time mode's
ForeachWriter (PySpark 4.2+).

The `pip-spark-X.Y` combinations pin nothing but Spark: eos's wheel and `pyspark==X.Y.Z` are installed
together as a user would (`pip install 'eos_spark-*.whl[pyspark]' pyspark==3.5.7`), so each gets what
pip picks from pyproject.toml's ranges, never the lowest or newest of each; `import eos` is tried from outside
the checkout first (where a user meets a set that does not work), then the tests run from the checkout
against that set.

Writes reports/matrix.json and prints the README's table.

    python -m tests.matrix [--only NAME ...] [--out reports]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[1]

E2E_CLASSIC = [
    "tests/integration/test_driver_process.py::test_driver_sigkilled_three_times_stays_exactly_once[classic]",
    # the JVM data path (eos's jar, built against the installed PySpark, on Scala 2.12 too)
    "tests/integration/test_driver_process.py::test_driver_sigkilled_three_times_stays_exactly_once[jvm]",
    "tests/integration/test_jvm_writer.py",
    "tests/integration/test_state.py::test_stateful_exactly_once_survives_kills_abort_and_lost_state"
    "[transactional-classic-rows-rocksdb]",
    "tests/integration/test_state.py::test_stateful_exactly_once_survives_kills_abort_and_lost_state"
    "[wipe-classic-batch-rocksdb]",
    "tests/integration/test_spark_read.py",
    "tests/integration/test_deploy.py",  # on a 2-worker cluster: eos's task placement classes too
    "tests/integration/test_affinity.py",  # the placement classes (Scala 2.12's coalescer on Spark 3.5)
    # the wheel into a fresh venv (the Connect-only client's test needs make setup's pyspark-client wheel)
    "tests/integration/test_package.py::test_wheel_installs_into_a_fresh_venv_and_runs_the_pipeline_exactly_once",
    "tests/integration/test_realtime_mode.py",  # skipped below PySpark 4.2 (no trigger(realTime=))
    # format("eos"): skipped below Spark 4.0 (no Python data sources)
    "tests/integration/test_format_eos.py::test_driver_sigkilled_running_counts_stay_exactly_once[classic]",
    "tests/integration/test_format_eos.py::test_a_split_first_batch_fails_loses_nothing_and_recovers_once_the_split_is_gone",
    "tests/integration/test_input_coordinates.py",
    "tests/integration/test_foreach_writer.py",
]
E2E_CONNECT = [
    "tests/integration/test_driver_process.py::test_driver_sigkilled_three_times_stays_exactly_once[connect]",
    "tests/integration/test_state.py::test_stateful_exactly_once_survives_kills_abort_and_lost_state"
    "[transactional-connect-batch-sqlite]",
    "tests/integration/test_format_eos.py::test_driver_sigkilled_running_counts_stay_exactly_once[connect]",
    # format("eos") on the JVM data path under Connect: the server's eos process killed mid-batch
    "tests/integration/test_format_eos.py::"
    "test_the_connect_servers_eos_process_killed_mid_batch_is_started_again_and_stays_exactly_once",
    # a Declarative Pipeline (PySpark 4.1+) whose sink is format("eos"), run by spark-pipelines, SIGKILLed
    "tests/integration/test_pipelines.py",
]


@attrs.frozen
class Combo:
    name: str
    python: str
    kafka: str
    pins: tuple[str, ...]
    #: Spark Connect too (PySpark 3.5's wheel has no Connect server: it needs spark-connect_2.12)
    connect: bool
    note: str = ""
    #: install eos's wheel beside `pins` (pyspark alone) and let pip pick the rest
    wheel: bool = False
    #: the JDK the tests' Spark JVMs run on (JAVA_HOME), where not the machine's default
    java_home: str | None = None


COMBOS = (
    Combo(
        "oldest",
        python="3.10",
        kafka="3.9.2",
        pins=(
            "pyspark==3.5.7",
            "confluent-kafka==2.3.0",
            "pyarrow==14.0.2",
            "numpy<2",  # pyarrow 14 was built against NumPy 1
            "pandas==2.2.3",
            "attrs==23.1.0",
            "structlog==23.1.0",
        ),
        connect=False,
        note="the lowest of every range in pyproject.toml",
    ),
    Combo(
        "newest",
        python="3.12",
        kafka="4.3.0",
        pins=(
            "pyspark==4.2.0",
            "confluent-kafka==2.16.1",
            "pyarrow==25.0.1",
            "attrs==26.1.0",
            "structlog==26.1.0",
        ),
        connect=True,
        note="the newest Spark whose connector Maven Central serves here (4.2.1 and 4.3.0: no connector)",
    ),
    # One per supported Spark minor, with the version of it whose connector Maven Central serves here.
    *(
        Combo(
            f"pip-spark-{spark.rsplit('.', 1)[0]}",
            python="3.11",
            kafka="4.1.1",
            pins=(f"pyspark=={spark}",),
            connect=False,
            note="eos's wheel and this Spark alone: everything else as pip picks it",
            wheel=True,
        )
        for spark in ("3.5.7", "4.0.0", "4.1.1", "4.2.0")
    ),
    # The newest runtimes here: CPython 3.13 (pyenv's; no 3.14 here), and Java 25 (Temurin's).
    Combo(
        "python-3.13",
        python="3.13",
        kafka="4.1.1",
        pins=("pyspark==4.2.0",),
        connect=False,
        note="the newest Python here, with the newest Spark whose connector Maven Central serves",
        wheel=True,
    ),
    Combo(
        "java-25",
        python="3.11",
        kafka="4.1.1",
        pins=("pyspark==4.2.0",),
        connect=False,
        note="Spark's JVMs on Java 25 (Temurin), the newest Spark whose connector Maven Central serves",
        wheel=True,
        java_home="/usr/lib/jvm/temurin-25-jdk-amd64",
    ),
)


def log(message: str) -> None:
    print(f"[matrix] {message}", flush=True)


def run(argv: list[str], env: dict[str, str] | None = None, log_path: Path | None = None) -> int:
    out = open(log_path, "ab") if log_path else None  # noqa: SIM115 - closed below
    try:
        return subprocess.run(
            argv, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=out, stderr=out
        ).returncode
    finally:
        if out:
            out.close()


def cache() -> Path:
    return Path(os.environ.get("EOS_CACHE", ROOT / ".cache"))


def mvn(pom: str, *args: str, log_path: Path) -> None:
    argv = ["mvn", "-q", "-B", "-s", "docker/maven/settings.xml", "-f", pom, "dependency:copy-dependencies"]
    if run([*argv, "-DincludeScope=runtime", *args], log_path=log_path) != 0:
        raise RuntimeError(f"maven failed ({' '.join(args)}): see {log_path}")


def find_python(version: str) -> str:
    """`pythonX.Y` that runs: on PATH, or a pyenv install (whose shim may not be active)."""
    candidates = [shutil.which(f"python{version}")]
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates += sorted(str(p) for p in root.glob(f"versions/{version}.*/bin/python{version}"))
    for candidate in filter(None, candidates):
        if subprocess.run([candidate, "--version"], capture_output=True).returncode == 0:
            return candidate
    raise RuntimeError(f"no working python{version} (on PATH or under {root}/versions)")


def prepare(combo: Combo, work: Path) -> Path:
    """The combination's venv with eos and its pins, the connector jars and the broker jars."""
    venv = work / "venv"
    python = venv / "bin" / "python"
    log_path = work / "setup.log"
    if not python.exists():
        base = find_python(combo.python)
        if run([base, "-m", "venv", str(venv)], log_path=log_path) != 0:
            raise RuntimeError(f"venv failed: see {log_path}")
    if combo.wheel:
        _install_wheel(combo, python, work, log_path)
    else:
        pins = work / "constraints.txt"
        pins.write_text("\n".join(combo.pins) + "\n")
        extras = "pyspark,test,connect" if combo.connect else "pyspark,test"
        log(f"{combo.name}: pip install -e '.[{extras}]' -c {pins.name} ({', '.join(combo.pins)})")
        if run(
            [str(python), "-m", "pip", "install", "-q", "-e", f".[{extras}]", "-c", str(pins)],
            log_path=log_path,
        ):
            raise RuntimeError(f"pip failed: see {log_path}")
    maven_args = subprocess.run(
        [str(python), "-c", "from eos._spark._cache import maven_args; print(maven_args())"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    log(f"{combo.name}: Spark's Kafka connector ({' '.join(maven_args[:2])})")
    mvn("docker/maven/spark-pom.xml", *maven_args, log_path=log_path)
    broker = cache() / "kafka" / combo.kafka / "libs"
    if not any(broker.glob("kafka_2.13-*.jar")):
        log(f"{combo.name}: Kafka {combo.kafka} broker jars")
        mvn(
            "docker/maven/broker-pom.xml",
            f"-Dkafka.version={combo.kafka}",
            f"-DoutputDirectory={broker}",
            log_path=log_path,
        )
    return python


def _install_wheel(combo: Combo, python: Path, work: Path, log_path: Path) -> None:
    """eos's wheel and the combination's Spark, as a user installs them; then the tools the tests need
    (none of which brings NumPy or pyarrow). `import eos` from outside the checkout must work."""
    dist = work / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    if run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)], log_path=log_path):
        raise RuntimeError(f"building the wheel failed: see {log_path}")
    (wheel,) = dist.glob("*.whl")
    log(f"{combo.name}: pip install '{wheel.name}[pyspark]' {' '.join(combo.pins)} (nothing else pinned)")
    if run([str(python), "-m", "pip", "install", "-q", f"{wheel}[pyspark]", *combo.pins], log_path=log_path):
        raise RuntimeError(f"pip failed: see {log_path}")
    imported = subprocess.run(
        [str(python), "-c", "import eos, numpy, pyarrow; print(eos.__file__)"],
        cwd=work,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    if imported.returncode != 0:
        raise RuntimeError(f"import eos failed with what pip picked: {imported.stderr.strip()[-500:]}")
    tools = ["pytest>=8", "pytest-timeout>=2.2", "psutil>=5.9", "testcontainers>=4", "build>=1"]
    if run([str(python), "-m", "pip", "install", "-q", *tools], log_path=log_path):
        raise RuntimeError(f"pip failed (test tools): see {log_path}")


def installed(python: Path) -> dict[str, str]:
    out = subprocess.run(
        [str(python), "-m", "pip", "freeze"], capture_output=True, text=True, check=True
    ).stdout
    versions = dict(line.split("==", 1) for line in out.splitlines() if "==" in line)
    versions["python"] = subprocess.run(
        [str(python), "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return versions


def java_version(java_home: str) -> str:
    """The JDK's version as `java -version` prints it (its first line's quoted part)."""
    shown = subprocess.run([f"{java_home}/bin/java", "-version"], capture_output=True, text=True).stderr
    return shown.split('"')[1] if '"' in shown else shown.strip()


def run_combo(combo: Combo, out: Path) -> dict:
    work = cache() / "matrix" / combo.name
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    result: dict = {"combo": combo.name, "note": combo.note, "kafka": combo.kafka, "pins": list(combo.pins)}
    try:
        python = prepare(combo, work)
    except RuntimeError as exc:
        return {**result, "ok": False, "error": str(exc)}
    result["versions"] = {
        k: v
        for k, v in installed(python).items()
        if k in ("python", "pyspark", "confluent-kafka", "pyarrow", "numpy")
    }
    env = {"EOS_BROKER_VERSION": combo.kafka, "PYTHONPATH": ""}
    if combo.java_home is not None:
        if not Path(combo.java_home, "bin", "java").exists():
            return {**result, "ok": False, "error": f"no JDK at {combo.java_home}"}
        env.update(JAVA_HOME=combo.java_home, PATH=f"{combo.java_home}/bin:{os.environ['PATH']}")
        result["versions"]["java"] = java_version(combo.java_home)
    for label, args in (
        ("unit", ["tests/unit"]),
        ("e2e", E2E_CLASSIC + (E2E_CONNECT if combo.connect else [])),
    ):
        log_path = out / f"matrix-{combo.name}-{label}.log"
        log_path.unlink(missing_ok=True)
        log(f"{combo.name}: {label} tests (log {log_path})")
        t = time.monotonic()
        code = run(
            [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], env=env, log_path=log_path
        )
        tail = log_path.read_text(errors="replace").strip().splitlines()
        summary = next((line for line in reversed(tail) if " passed" in line or " failed" in line), "?")
        result[label] = {
            "ok": code == 0,
            "summary": summary.strip("= "),
            "seconds": round(time.monotonic() - t),
        }
        log(f"{combo.name}: {label}: {result[label]['summary']}")
    result["ok"] = all(result[label]["ok"] for label in ("unit", "e2e"))
    result["minutes"] = round((time.monotonic() - started) / 60, 1)
    return result


def table(results: list[dict]) -> str:
    rows = [
        "| combination | Python | PySpark | confluent-kafka | pyarrow | Kafka broker | unit"
        " | e2e (exactly-once, stateful, read_stream) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        v = r.get("versions", {})
        unit, e2e = r.get("unit", {}), r.get("e2e", {})
        rows.append(
            f"| {r['combo']} | {v.get('python', '?')} | {v.get('pyspark', '?')}"
            f" | {v.get('confluent-kafka', '?')} | {v.get('pyarrow', '?')} | {r['kafka']}"
            f" | {unit.get('summary', r.get('error', '?'))}"
            f" | {e2e.get('summary', '-')} |"
        )
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="combination names", default=[c.name for c in COMBOS])
    parser.add_argument("--list", action="store_true", help="print the combinations' names and stop")
    parser.add_argument("--out", default="reports")
    args = parser.parse_args()
    if args.list:
        print("\n".join(f"{c.name}: {c.note}" for c in COMBOS))
        return 0
    out = ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    results = [run_combo(c, out) for c in COMBOS if c.name in args.only]
    (out / "matrix.json").write_text(json.dumps(results, indent=2))
    print(table(results))
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
