"""eos.errors (the hierarchy, a leaf) and eos._kafka._translate (the one place confluent-kafka errors are
classified)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException

import eos
from eos import errors
from eos._kafka._translate import (
    Delivery,
    Kind,
    classify,
    classify_delivery,
    is_fenced,
    kafka_error_of,
    missing_acl,
)
from eos._kafka._translate import translate as as_eos_error


def kerr(code=KafkaError._FAIL, reason="boom", *, fatal=False, retriable=False, abort=False) -> KafkaError:
    return KafkaError(code, reason, fatal=fatal, retriable=retriable, txn_requires_abort=abort)


FENCED = [KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH]


@pytest.mark.parametrize(
    ("err", "kind"),
    [
        (None, Kind.FATAL),
        (kerr(), Kind.FATAL),  # plain, unknown: fatal
        (kerr(KafkaError.TOPIC_AUTHORIZATION_FAILED), Kind.FATAL),
        (kerr(fatal=True), Kind.FATAL),
        (kerr(fatal=True, retriable=True, abort=True), Kind.FATAL),
        (kerr(abort=True), Kind.ABORTABLE),
        (kerr(abort=True, retriable=True), Kind.ABORTABLE),
        (kerr(retriable=True), Kind.RETRIABLE),
        (kerr(KafkaError._TIMED_OUT, retriable=True), Kind.RETRIABLE),
        # transient broker states are retriable even where the flag is missing (admin/group responses)
        (kerr(KafkaError.COORDINATOR_LOAD_IN_PROGRESS), Kind.RETRIABLE),
        (kerr(KafkaError.UNSTABLE_OFFSET_COMMIT), Kind.RETRIABLE),
        (kerr(KafkaError.CONCURRENT_TRANSACTIONS), Kind.RETRIABLE),
    ],
)
def test_classify(err, kind):
    assert classify(err) is kind


@pytest.mark.parametrize("code", FENCED)
@pytest.mark.parametrize(
    "flags", [{}, {"retriable": True}, {"abort": True}, {"retriable": True, "abort": True}]
)
def test_fenced_codes_are_fatal_whatever_the_flags(code, flags):
    err = kerr(code, **flags)
    assert classify(err) is Kind.FATAL
    assert is_fenced(err)


def test_is_fenced_is_false_for_others():
    assert not is_fenced(None)
    assert not is_fenced(kerr(fatal=True))


@pytest.mark.parametrize(
    ("err", "cls"),
    [
        (kerr(retriable=True), eos.RetriableError),
        (kerr(abort=True), eos.TransactionAbortableError),
        (kerr(KafkaError.PRODUCER_FENCED, retriable=True), eos.FencedError),
        (kerr(KafkaError._FENCED), eos.FencedError),
        (kerr(fatal=True), eos.FatalError),
        (kerr(), eos.FatalError),
    ],
)
def test_as_eos_error_maps_kind_to_class(err, cls):
    wrapped = as_eos_error(KafkaException(err), "commit_transaction (app:t:0)")
    assert type(wrapped) is cls
    assert wrapped.kafka_error is err
    assert "commit_transaction (app:t:0)" in str(wrapped)
    assert "boom" in str(wrapped)


def test_as_eos_error_on_a_non_kafka_exception_is_fatal():
    wrapped = as_eos_error(RuntimeError("no idea"), "flush")
    assert type(wrapped) is eos.FatalError
    assert wrapped.kafka_error is None
    assert "flush" in str(wrapped) and "no idea" in str(wrapped)


def test_kafka_error_of():
    err = kerr()
    assert kafka_error_of(KafkaException(err)) is err
    assert kafka_error_of(KafkaException("text only")) is None
    assert kafka_error_of(ValueError(err)) is None


@pytest.mark.parametrize(
    ("code", "verdict"),
    [
        (KafkaError.MSG_SIZE_TOO_LARGE, Delivery.PERMANENT),
        (KafkaError.UNKNOWN_TOPIC_OR_PART, Delivery.PERMANENT),
        (KafkaError._UNKNOWN_TOPIC, Delivery.PERMANENT),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, Delivery.PERMANENT),
        (KafkaError._MSG_TIMED_OUT, Delivery.ABORTABLE),
        (KafkaError.NOT_LEADER_FOR_PARTITION, Delivery.ABORTABLE),
        (KafkaError._FENCED, Delivery.FENCED),
        (KafkaError.PRODUCER_FENCED, Delivery.FENCED),
    ],
)
def test_classify_delivery(code, verdict):
    assert classify_delivery(KafkaError(code)) is verdict


@pytest.mark.parametrize("cls", [eos.RecordError, eos.ProcessError, eos.ProduceError])
def test_record_error_names_topic_partition_offset(cls):
    exc = cls("value too large", topic="orders-in", partition=4, offset=1234)
    assert (exc.topic, exc.partition, exc.offset) == ("orders-in", 4, 1234)
    message = str(exc)
    assert "value too large" in message
    assert "orders-in/4@1234" in message
    assert "aborted" in message


def test_config_error_names_field():
    exc = eos.ConfigError("app_id", "is bad")
    assert exc.field == "app_id"
    assert str(exc) == "invalid config 'app_id': is bad"


def test_topic_not_found_names_topic():
    exc = eos.TopicNotFoundError("orders-out")
    assert exc.topic == "orders-out"
    assert "'orders-out'" in str(exc)


@pytest.mark.parametrize(
    ("cls", "bases"),
    [
        (eos.ConfigError, (eos.EosError, ValueError)),
        (eos.BatchSchemaError, (eos.EosError, ValueError)),
        (eos.BrokerUnreachableError, (eos.EosError,)),
        (eos.TopicNotFoundError, (eos.EosError,)),
        (eos.ProcessError, (eos.RecordError, eos.EosError)),
        (eos.ProduceError, (eos.RecordError, eos.EosError)),
        (eos.RetriableError, (eos.KafkaClientError, eos.EosError)),
        (eos.TransactionAbortableError, (eos.KafkaClientError, eos.EosError)),
        (eos.FatalError, (eos.KafkaClientError, eos.EosError)),
        (eos.FencedError, (eos.FatalError, eos.KafkaClientError, eos.EosError)),
    ],
)
def test_hierarchy(cls, bases):
    for base in bases:
        assert issubclass(cls, base)


def test_kinds_are_disjoint():
    assert not issubclass(eos.TransactionAbortableError, eos.FatalError)
    assert not issubclass(eos.RetriableError, eos.FatalError)
    assert not issubclass(eos.RecordError, eos.KafkaClientError)
    assert not issubclass(eos.FatalError, eos.TransactionAbortableError)


def test_errors_module_imports_nothing_from_eos():
    tree = ast.parse(Path(errors.__file__).read_text())
    imported = [
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        )
    ]
    assert imported and not [n for n in imported if n == "eos" or n.startswith("eos.")], imported


def test_a_refused_init_transactions_names_the_missing_acl():
    text = missing_acl(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "orders:in:3")
    assert "'orders:in:3'" in text and "WRITE and DESCRIBE" in text
    assert "--transactional-id orders --resource-pattern-type prefixed" in text
    assert "IdempotentWrite --cluster" in missing_acl(KafkaError.CLUSTER_AUTHORIZATION_FAILED, "orders:in:3")
    assert missing_acl(KafkaError.TOPIC_AUTHORIZATION_FAILED, "orders:in:3") is None
    assert missing_acl(None, None) is None
    # the codes are Kafka's protocol codes, which the Java client's Errors enum (the JVM writer) shares
    assert (KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED) == (
        53,
        31,
    )
