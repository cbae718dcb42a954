"""Kafka's tools jars for `eos transactions`, found or fetched on first use.

A checkout has them from `make setup` (the broker's jars, `eos._spark._cache.kafka_libs`). A `pip install`
has no Maven and no broker jars, so the few jars `TransactionsCommand` needs are downloaded from a
Maven repository (Maven Central by default) into a user cache, each checked against the repository's
SHA-1 and moved into place only when whole. The versions of its dependencies come from the
kafka-tools POM of that Kafka version, so only the artifact names are listed here.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from eos._spark._cache import kafka_libs
from eos.cli._base import EXIT_ERROR, CliError

TOOLS_VERSION = "4.1.1"  # the Kafka of `make setup`'s broker; EOS_KAFKA_TOOLS_VERSION overrides
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
_STAMP = ".complete"

# What TransactionsCommand loads (tried: list, find-hanging, describe, abort run with exactly these).
_KAFKA_ARTIFACTS = ("kafka-tools", "kafka-tools-api", "kafka-clients", "kafka-server-common")
# (group, artifact, the POM dependency whose version it takes)
_THIRD_PARTY = (
    ("net.sourceforge.argparse4j", "argparse4j", "argparse4j"),
    ("com.fasterxml.jackson.core", "jackson-databind", "jackson-databind"),
    ("com.fasterxml.jackson.core", "jackson-core", "jackson-databind"),
    ("com.fasterxml.jackson.core", "jackson-annotations", "jackson-databind"),
    ("org.slf4j", "slf4j-api", "slf4j-api"),
)


def _repo() -> str:
    return os.environ.get("EOS_MAVEN_REPO", MAVEN_CENTRAL).rstrip("/")


def _version() -> str:
    return os.environ.get("EOS_KAFKA_TOOLS_VERSION", TOOLS_VERSION)


def user_cache() -> Path:
    """`$EOS_CACHE/kafka-tools/<version>` if EOS_CACHE is set, else the user's cache folder."""
    if os.environ.get("EOS_CACHE"):
        root = Path(os.environ["EOS_CACHE"])
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "eos"
    return root / "kafka-tools" / _version()


def _url(group: str, artifact: str, version: str, ext: str) -> str:
    return f"{_repo()}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.{ext}"


def _get(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 - a configured https URL
            return response.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise OSError(f"{url}: {reason}") from None


def _dependency_versions(pom: str) -> dict[str, str]:
    out = {}
    for block in re.findall(r"<dependency>(.*?)</dependency>", pom, re.S):
        artifact = re.search(r"<artifactId>(.*?)</artifactId>", block)
        version = re.search(r"<version>(.*?)</version>", block)
        if artifact and version:
            out[artifact.group(1).strip()] = version.group(1).strip()
    return out


def _wanted(version: str) -> list[tuple[str, str, str]]:
    pom = _get(_url("org.apache.kafka", "kafka-tools", version, "pom")).decode("utf-8")
    versions = _dependency_versions(pom)
    jars = [("org.apache.kafka", a, version) for a in _KAFKA_ARTIFACTS]
    for group, artifact, source in _THIRD_PARTY:
        if source not in versions:
            raise OSError(f"the kafka-tools {version} POM names no {source} version")
        jars.append((group, artifact, versions[source]))
    return jars


def _fetch(target: Path) -> None:
    version = _version()
    jars = _wanted(version)
    print(
        f"eos: fetching Kafka {version}'s tools jars ({len(jars)} files) from {_repo()} into {target} (once)",
        file=sys.stderr,
    )
    target.mkdir(parents=True, exist_ok=True)
    for group, artifact, jar_version in jars:
        name = f"{artifact}-{jar_version}.jar"
        if (target / name).exists():
            continue
        data = _get(_url(group, artifact, jar_version, "jar"))
        expected = _get(_url(group, artifact, jar_version, "jar.sha1")).decode("ascii").split()[0].lower()
        actual = hashlib.sha1(data).hexdigest()  # noqa: S324 - the checksum Maven repositories publish
        if actual != expected:
            raise OSError(f"{name}: SHA-1 {actual} does not match the repository's {expected}")
        fd, tmp = tempfile.mkstemp(dir=target, prefix=f".{name}.")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target / name)
        print(f"eos:   {name} ({len(data) // 1024} KiB)", file=sys.stderr)
    (target / _STAMP).write_text(version + "\n")


def tools_classpath() -> Path:
    """The folder whose jars run TransactionsCommand: make setup's broker jars if there, else the
    user cache, fetched on first use. Raises CliError (exit 1) saying what to do when it cannot."""
    libs = kafka_libs()
    if any(libs.glob("kafka-tools-*.jar")):
        return libs
    target = user_cache()
    if (target / _STAMP).exists():
        return target
    try:
        _fetch(target)
    except OSError as exc:
        raise CliError(
            EXIT_ERROR,
            f"Kafka's tools jars are needed for `eos transactions` and could not be fetched: {exc}."
            f" Allow HTTPS to {_repo()}, or set EOS_MAVEN_REPO to a Maven mirror you can reach, or put"
            f" kafka-tools and its dependencies in {target} yourself (with an empty {_STAMP} file), or run"
            " `make setup` in a checkout of eos",
        ) from None
    return target
