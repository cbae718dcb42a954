"""librdkafka's log lines go through the `eos.kafka` logger, not to stderr as `%3|...|FAIL|...` lines:
real clients against a port nobody listens on (connection refused, no broker needed)."""

from __future__ import annotations

import logging
import re

import pytest

import eos
from eos import _log, testing
from eos._kafka import _clients
from eos._kafka._pool import _cache_key
from eos._kafka._producer import OutputProducer
from eos.session import free_port


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def kafka_records():
    logger = _log.kafka_logger()
    handler, level = Records(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler.records
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_every_client_eos_builds_logs_through_eos_kafka_not_stderr(kafka_records, capfd):
    bootstrap = f"127.0.0.1:{free_port()}"  # refused
    cfg = eos.Config(bootstrap_servers=bootstrap, app_id="kafka-log", output_topic="out")
    admin, consumer = _clients.admin(cfg), _clients.watermark_consumer(cfg)
    producer = OutputProducer(cfg, cfg.transactional_id("in", 0))
    try:
        for client in (admin, consumer, producer._producer):
            with pytest.raises(Exception):  # noqa: B017 - whatever librdkafka makes of no broker
                client.list_topics(timeout=1)
        admin.poll(0)  # the lines arrive where the client is polled
        consumer.poll(0.1)
        producer._producer.poll(0)
        with pytest.raises(Exception):  # noqa: B017
            testing.create_topic(bootstrap, "out", 1, timeout=1)
    finally:
        producer.records.close()
        producer._producer = None
        _clients.clear()
    clients = {r.args[1] for r in kafka_records if r.args and r.args[0] == "FAIL"}
    assert len(clients) >= 3, clients  # admin, consumer, producer (eos.testing's may go unpolled)
    assert not re.search(r"^%\d\|", capfd.readouterr().err, re.M)
    assert "logger" not in str(_cache_key(cfg, cfg.transactional_id("in", 0)))


def test_librdkafka_lines_are_critical_only_unless_debug(monkeypatch):
    """What librdkafka logs below CRITICAL is mostly what it retries by itself: eos.kafka starts at
    CRITICAL, or DEBUG with EOS_LOG_LEVEL=DEBUG, unless the application set its level."""
    kafka = logging.getLogger(_log.KAFKA_LOGGER)
    saved = kafka.level, logging.getLogger("eos").level
    try:
        for wanted, expected in ((None, logging.CRITICAL), ("debug", logging.DEBUG)):
            kafka.setLevel(logging.NOTSET)
            monkeypatch.delenv("EOS_LOG_LEVEL", raising=False)
            if wanted:
                monkeypatch.setenv("EOS_LOG_LEVEL", wanted)
            _log.forget_setup()
            assert _log.kafka_logger().level == expected
        kafka.setLevel(logging.WARNING)  # the application's choice stays
        _log.forget_setup()
        assert _log.kafka_logger().level == logging.WARNING
    finally:
        kafka.setLevel(saved[0])
        logging.getLogger("eos").setLevel(saved[1])
        _log.forget_setup()
