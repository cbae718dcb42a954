"""A real Schema Registry for the tests: Apicurio Registry with in-memory storage, which serves Confluent's
REST API at /apis/ccompat/v7 and checks compatibility, canonicalises schemas and resolves references
itself. `make setup` builds it (docker/maven/registry-pom.xml, into ~/.cache/eos); a test starts its own
on a free loopback port and gets an empty registry.

What it does differently from Confluent's (seen with confluent-kafka's client): a refused schema's 409
carries `error_code` 0, not 409 (check `http_status_code`); a Protobuf schema is kept as the client sent
it (confluent-kafka's serializer sends a base64 descriptor, which Apicurio cannot parse for a
compatibility check, so Protobuf subjects are tested with compatibility NONE).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

from eos.session import free_port


def app() -> Path:
    """The runnable registry `make setup` built: under EOS_TEST_REGISTRY_HOME, else where the Makefile puts it
    (~/.cache/eos/registry-<sha1 of the pom, 12 digits>)."""
    home = os.environ.get("EOS_TEST_REGISTRY_HOME")
    if not home:
        pom = Path(__file__).resolve().parents[2] / "docker" / "maven" / "registry-pom.xml"
        home = str(
            Path.home() / ".cache" / "eos" / f"registry-{hashlib.sha1(pom.read_bytes()).hexdigest()[:12]}"
        )
    return Path(home) / "target" / "quarkus-app" / "quarkus-run.jar"


class Apicurio:
    """One registry process; `url` is what confluent-kafka's `SchemaRegistryClient` takes."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/apis/ccompat/v7"
        self.log = log
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 90) -> Apicurio:
        jar = app()
        if not jar.exists():
            raise RuntimeError(f"no Schema Registry at {jar}: run `make setup`")
        argv = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
        argv += ["-Dquarkus.http.host=127.0.0.1", f"-Dquarkus.http.port={self.port}", "-jar", str(jar)]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Schema Registry exited {self.proc.returncode}: {self.log}")
            try:
                self.get("/subjects")
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the Schema Registry did not answer in {timeout}s: {self.log}"
                    ) from None
                time.sleep(0.3)

    def get(self, path: str):
        with urllib.request.urlopen(self.url + path, timeout=5) as r:
            return json.load(r)

    def put(self, path: str, body: dict):
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            method="PUT",
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
        with urllib.request.urlopen(request, timeout=5) as r:
            return json.load(r)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
