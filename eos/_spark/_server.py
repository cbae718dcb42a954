"""The JVM data path under Spark Connect: requests to eos's plugin in the Connect server
(eos/_spark/jvm/ConnectPlugin.java). A Connect client has no JVM to call through Py4J, so the sink, in the
server's `foreachBatch` worker, sends each request as a relation over the batch's own relation: the
batch's lineage (what `eos._spark._partitioning` reads through Py4J in a classic session) and the batch
written by the JVM writer's tasks (`eos._spark._jvm_writer`). The server needs eos's jar and the plugin
(`spark.connect.extensions.relation.classes`; `eos.spark_session(remote="local")` starts its server with
both, docs/deploy.md says how for a server started elsewhere)."""

from __future__ import annotations

import functools
import json
from typing import Any

#: the plugin's class, for `spark.connect.extensions.relation.classes`
PLUGIN = "eos.spark.ConnectPlugin"
#: the type of eos's requests (ConnectPlugin.TYPE)
TYPE_URL = "type.googleapis.com/eos.Request"

#: the requests' and answers' version (ConnectPlugin.VERSION)
VERSION = "1"
#: what a Connect server says of a relation no plugin of its plans (Spark's InvalidPlanInput)
_NO_PLUGIN = "No handler found for extension"
#: what eos's plugin says of a request it does not know (a jar of an eos from before `version`)
_UNKNOWN = "an eos request this jar does not know"

#: why the server of a Connect session (by its session id) cannot run the JVM writer; None: it can
_found: dict[str, str | None] = {}


def unavailable(session: Any) -> str | None:
    """Why the server of Connect session `session` cannot run the JVM writer (None: it can): no eos
    plugin, or another eos's; asked once per session, with a request that reads nothing. Any other
    failure of the request is raised."""
    key = str(getattr(session, "session_id", id(session)))
    if key not in _found:
        try:
            version = _ask(session.range(0), {"op": "version"})[0]
        except Exception as exc:
            if _NO_PLUGIN in str(exc):
                _found[key] = (
                    f"the Spark Connect server does not run eos's plugin ({PLUGIN} with eos's jar, when it"
                    " starts: docs/deploy.md)"
                )
                return _found[key]
            if _UNKNOWN not in str(exc):
                raise
            version = "0"
        _found[key] = None
        if version != VERSION:
            _found[key] = (
                f"the Spark Connect server runs the eos plugin of another eos (its version {version}, this"
                f" eos's {VERSION}): start it with this eos's jar"
            )
    return _found[key]


def lineage(df: Any) -> str:
    """Lineage.java's answer for Connect DataFrame `df`."""
    return _ask(df, {"op": "lineage"})[0]


def write(frame: Any, spec: dict) -> list[list]:
    """`frame` written as `spec` plans by the JVM writer's tasks in the server: the stats rows."""
    return [json.loads(answer) for answer in _ask(frame, {"op": "write", "spec": spec})]


def write_with_lineage(frame: Any, spec: dict) -> list[list] | dict:
    """`frame` written as `spec` plans, its sources the batch's lineage as the plugin reads it, in one
    request: JvmWriter.writeAsRead's answer, decoded (the stats rows, or `{"lineage": ...}` where
    nothing was written)."""
    answers = [json.loads(answer) for answer in _ask(frame, {"op": "write", "spec": spec, "lineage": True})]
    return answers[0] if len(answers) == 1 and isinstance(answers[0], dict) else answers


def _ask(df: Any, request: dict) -> list[str]:
    from pyspark.sql.connect.dataframe import DataFrame

    plan = _request_class()(df._plan, json.dumps(request))
    return [row[0] for row in DataFrame(plan, df.sparkSession).collect()]


def _field(number: int, data: bytes) -> bytes:
    """A length-delimited protobuf field."""
    head = bytearray([number << 3 | 2])
    size = len(data)
    while size > 0x7F:
        head.append(size & 0x7F | 0x80)
        size >>= 7
    head.append(size)
    return bytes(head) + data


@functools.cache
def _request_class() -> type:
    """The plan class of a request (Connect's modules imported only where a Connect session runs)."""
    from pyspark.sql.connect.plan import LogicalPlan

    class Request(LogicalPlan):
        """eos.Request: the batch's relation (field 1) and the request as JSON (field 2)."""

        def __init__(self, child: Any, request: str) -> None:
            super().__init__(child)
            self._request = request

        def plan(self, session: Any) -> Any:
            relation = self._create_proto_relation()
            child = self._child.plan(session).SerializeToString()
            relation.extension.type_url = TYPE_URL
            relation.extension.value = _field(1, child) + _field(2, self._request.encode())
            return relation

    return Request
