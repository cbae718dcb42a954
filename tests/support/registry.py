"""A loopback stand-in for a Confluent Schema Registry: the REST calls confluent-kafka's client makes.

No Schema Registry server can be installed on this machine (README "Schema Registry"). This one speaks the
calls the client makes (register, look up, latest version, schema by id) with the registry's status and
error codes, so that the client's HTTP path runs for real: Basic auth (401), a subject that refuses every
new schema (409, `incompatible`), transient failures (`fail_next`: 503, retried by the client), and a
server that is down (`stop`) and back (`start`, same port). It does not check compatibility itself.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

import attrs
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from eos import testing
from eos.session import free_port


class Registry:
    def __init__(self, users: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.users = users or {}
        self.url = f"http://127.0.0.1:{self.port}"
        #: subject -> [(id, schema dict)], in version order
        self.subjects: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        self.schemas: dict[int, dict[str, Any]] = {}
        #: subjects where any schema not registered yet is refused as incompatible (HTTP 409)
        self.incompatible: set[str] = set()
        #: (method, path) of every request, in order
        self.requests: list[tuple[str, str]] = []
        self._failures: list[int] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def __enter__(self) -> Registry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Registry:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                registry._serve(self, "GET")

            def do_POST(self) -> None:  # noqa: N802
                registry._serve(self, "POST")

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def fail_next(self, count: int, status: int = 503) -> None:
        """Answer the next `count` requests with `status`."""
        with self._lock:
            self._failures.extend([status] * count)

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        """Register directly (a schema some other producer registered)."""
        with self._lock:
            return self._register(subject, {"schema": schema, "schemaType": schema_type})

    # -- the REST calls --------------------------------------------------------------------------------

    def _serve(self, request: BaseHTTPRequestHandler, method: str) -> None:
        path = urlsplit(request.path).path
        length = int(request.headers.get("Content-Length") or 0)
        body = json.loads(request.rfile.read(length)) if length else None
        with self._lock:
            self.requests.append((method, path))
            if self._failures:
                status, reply = self._failures.pop(0), {"error_code": 50001, "message": "try again"}
            elif self.users and not self._authorized(request.headers.get("Authorization")):
                status, reply = 401, {"error_code": 401, "message": "Unauthorized"}
            else:
                status, reply = self._answer(method, path, body)
        data = json.dumps(reply).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    def _authorized(self, header: str | None) -> bool:
        if not header or not header.startswith("Basic "):
            return False
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        return self.users.get(user) == password

    def _answer(self, method: str, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        if m := re.fullmatch(r"/subjects/([^/]+)/versions", path):
            subject = unquote(m[1])
            if method == "POST":
                if subject in self.incompatible and self._find(subject, body) is None:
                    return 409, {
                        "error_code": 409,
                        "message": f"Schema being registered is incompatible with an earlier schema for"
                        f' subject "{subject}"',
                    }
                return 200, {"id": self._register(subject, body)}
        if m := re.fullmatch(r"/subjects/([^/]+)", path):
            subject = unquote(m[1])
            if method == "POST":  # look up
                if subject not in self.subjects:
                    return 404, {"error_code": 40401, "message": f"Subject '{subject}' not found."}
                found = self._find(subject, body)
                if found is None:
                    return 404, {"error_code": 40403, "message": "Schema not found"}
                return 200, self._version(subject, found)
        if m := re.fullmatch(r"/subjects/([^/]+)/versions/(latest|\d+)", path):
            subject = unquote(m[1])
            versions = self.subjects.get(subject)
            if not versions:
                return 404, {"error_code": 40401, "message": f"Subject '{subject}' not found."}
            index = len(versions) - 1 if m[2] == "latest" else int(m[2]) - 1
            if not 0 <= index < len(versions):
                return 404, {"error_code": 40402, "message": "Version not found."}
            return 200, self._version(subject, index)
        if m := re.fullmatch(r"/schemas/ids/(\d+)", path):
            schema = self.schemas.get(int(m[1]))
            if schema is None:
                return 404, {"error_code": 40403, "message": "Schema not found"}
            return 200, dict(schema)
        return 404, {"error_code": 404, "message": f"no such endpoint {method} {path}"}

    def _key(self, body: dict[str, Any]) -> tuple:
        return (body.get("schemaType") or "AVRO", body["schema"])

    def _find(self, subject: str, body: dict[str, Any]) -> int | None:
        for index, (_, schema) in enumerate(self.subjects.get(subject, [])):
            if self._key(schema) == self._key(body):
                return index
        return None

    def _register(self, subject: str, body: dict[str, Any]) -> int:
        found = self._find(subject, body)
        if found is not None:
            return self.subjects[subject][found][0]
        schema = {"schema": body["schema"], "schemaType": body.get("schemaType") or "AVRO"}
        if body.get("references"):
            schema["references"] = body["references"]
        schema_id = next((i for i, s in self.schemas.items() if self._key(s) == self._key(schema)), None)
        if schema_id is None:
            schema_id = len(self.schemas) + 1
            self.schemas[schema_id] = schema
        self.subjects.setdefault(subject, []).append((schema_id, schema))
        return schema_id

    def _version(self, subject: str, index: int) -> dict[str, Any]:
        schema_id, schema = self.subjects[subject][index]
        return {"subject": subject, "id": schema_id, "version": index + 1, **schema}


def read_avro_output(bootstrap, output, settings):
    """The output read_committed, and its values decoded with confluent-kafka's Avro deserializer (each
    Order's item, as the input value it was made of)."""
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    deserialize = AvroDeserializer(SchemaRegistryClient(settings))
    context = SerializationContext(output, MessageField.VALUE)
    decoded = [
        attrs.evolve(r, value=deserialize(r.value, context)["item"].encode()) for r in records if r.value
    ]
    return records, decoded, hanging
