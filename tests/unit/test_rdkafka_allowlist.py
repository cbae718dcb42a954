"""The Arrow produce path reads confluent-kafka's private object layout (eos/_kafka/_rdkafka.py), so it is
taken only with a confluent-kafka version eos has run it with: make test's (constraints.txt) and make
matrix's. Any other version keeps the per-record loop, and says why in the log."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from confluent_kafka import Producer

from eos._kafka import _rdkafka
from tests.matrix import COMBOS

ROOT = Path(__file__).resolve().parents[2]
_NOWHERE = {"bootstrap.servers": "127.0.0.1:1"}  # librdkafka connects lazily: no broker is needed


@pytest.fixture
def producer():
    producer = Producer(_NOWHERE)
    yield producer
    producer.flush(0)


def test_a_confluent_kafka_version_outside_the_allowlist_keeps_the_loop(producer, monkeypatch, caplog):
    if _rdkafka._client_version() in _rdkafka.TESTED_CONFLUENT_KAFKA:  # make test's, make matrix's
        assert _rdkafka.ArrowProducer.of(producer) is not None
    monkeypatch.setattr(_rdkafka, "_client_version", lambda: "2.99.0", raising=False)
    caplog.set_level(logging.DEBUG, logger="eos")
    assert _rdkafka.ArrowProducer.of(producer) is None
    assert _rdkafka.handle(producer) is None
    (line,) = [r.eos for r in caplog.records if getattr(r, "eos", {}).get("event") == "arrow produce off"]
    assert line["confluent_kafka"] == "2.99.0" and "2.12.1" in line["reason"], line


def test_the_allowlist_is_every_confluent_kafka_version_make_test_and_make_matrix_run():
    pinned = re.search(r"^confluent-kafka==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M)
    assert pinned is not None
    versions = {pinned.group(1)}
    for combo in COMBOS:
        versions |= {p.split("==")[1] for p in combo.pins if p.startswith("confluent-kafka==")}
    assert versions <= _rdkafka.TESTED_CONFLUENT_KAFKA, versions - _rdkafka.TESTED_CONFLUENT_KAFKA
    assert re.fullmatch(r"\d+\.\d+\.\d+", _rdkafka._client_version())  # 2.3's version() is a tuple
