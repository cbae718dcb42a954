"""Every program of examples/ run against the test broker on a short input, its output read back
read_committed: nothing missing, nothing twice, order kept per input partition. So no example rots.

The examples share one seeded input topic (`orders`); each writes to an output topic of its own under an
app id of its own. Their `main` runs the query with `trigger(availableNow=True)` to the end."""

from __future__ import annotations

import json
import uuid
from collections import Counter

import attrs
import pytest
from confluent_kafka import Producer
from conftest import seed

from eos import testing
from examples import any_aggregation, avro_registry, dead_letters, enrich, format_eos, stateful_count
from examples import connect as connect_example
from tests.support.aggregates import check_running_counts, key_counts, read_output
from tests.support.counting import changelog_mismatches
from tests.support.registry import Registry, read_avro_output

PARTITIONS, PER_PARTITION = 4, 20


@pytest.fixture(scope="module")
def orders(bootstrap):
    """One input for every example: 20 records with unique sequence ids in each of 4 partitions."""
    topic = f"example-orders-{uuid.uuid4().hex[:8]}"
    testing.create_topic(bootstrap, topic, PARTITIONS)
    return topic, testing.produce_sequence(bootstrap, topic, PARTITIONS, PER_PARTITION)


def _run(example, spark, bootstrap, names, tmp_path, source, **extra):
    """`example.main` on `source` into a new output topic; the output topic and the app id."""
    output, app_id = names("out"), names("app")
    testing.create_topic(bootstrap, output, PARTITIONS)
    example.main(spark, bootstrap, source, output, str(tmp_path / "ckpt"), app_id, **extra)
    return output, app_id


def _exactly_once(expected, records):
    """`records` (read_output's, values mapped back to the input value each came from) carry each
    value of `expected` once, in input order per input partition."""
    result = testing.compare(expected, records)
    assert result.exactly_once and result.received == result.expected, result


def test_enrich(spark, bootstrap, names, tmp_path, orders):
    source, sent = orders
    output, _ = _run(enrich, spark, bootstrap, names, tmp_path, source)
    records = read_output(bootstrap, output)
    enriched = [(r, json.loads(r.value)) for r in records]
    assert all(o["tier"] == enrich.TIERS.get(r.key, "standard") for r, o in enriched), enriched[:3]
    assert {o["tier"] for _, o in enriched} == {"gold", "silver", "standard"}
    _exactly_once(testing.flatten(sent), [attrs.evolve(r, value=o["order"].encode()) for r, o in enriched])


def test_stateful_count(spark, bootstrap, names, tmp_path, orders):
    source, sent = orders
    output, app_id = _run(
        stateful_count, spark, bootstrap, names, tmp_path, source, state_dir=str(tmp_path / "state")
    )
    result = testing.compare(
        testing.flatten(sent),
        read_output(bootstrap, output),
        running_counts=testing.expected_running_counts(sent),
    )
    assert result.exactly_once and result.received == result.expected, result  # every count right, too
    assert changelog_mismatches(bootstrap, f"{app_id}-{source}-counts-changelog", sent) == 0


def test_any_aggregation(spark, bootstrap, names, tmp_path, orders):
    source, sent = orders
    output, _ = _run(any_aggregation, spark, bootstrap, names, tmp_path, source)
    result = check_running_counts(read_output(bootstrap, output), key_counts(sent))
    # one batch: each key's count once, and it is the key's true count
    assert result.exact and result.received == len(key_counts(sent)), result


def test_dead_letters(spark, bootstrap, names, tmp_path):
    """Bad records (not UTF-8) at offset 8 of partitions 0 and 2, between good ones."""
    source, _, first = seed(bootstrap, names, 8, PARTITIONS)
    bad = {0: b"\xff\xfe order 0", 2: b"\xc3 order 2"}
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for partition, value in bad.items():
        producer.produce(source, value, key=b"k8", partition=partition)
    assert producer.flush(30) == 0
    then = testing.produce_sequence(bootstrap, source, PARTITIONS, 8, start=8)
    dlq = names("dlq")
    testing.create_topic(bootstrap, dlq, 1)
    output, app_id = _run(dead_letters, spark, bootstrap, names, tmp_path, source, dead_letter_topic=dlq)

    records = read_output(bootstrap, output)
    expected = [v.upper() for p in range(PARTITIONS) for v in first[p] + then[p]]
    _exactly_once(expected, records)
    letters = read_output(bootstrap, dlq)
    seen = Counter(
        (dict(r.headers)["__eos.errors.partition"], dict(r.headers)["__eos.errors.offset"]) for r in letters
    )
    assert seen == Counter((str(p).encode(), b"8") for p in bad), seen  # each bad record once
    for letter in letters:
        headers = dict(letter.headers)
        assert letter.value == bad[int(headers["__eos.errors.partition"])]
        assert headers["__eos.errors.exception"] == b"UnicodeDecodeError", headers
        assert (
            headers["__eos.errors.topic"] == source.encode()
            and headers["__eos.errors.app.id"] == app_id.encode()
        )


def test_avro_registry(spark, bootstrap, names, tmp_path, orders):
    source, sent = orders
    with Registry() as registry:  # the loopback stand-in for a Schema Registry (tests/support/registry.py)
        output, _ = _run(avro_registry, spark, bootstrap, names, tmp_path, source, registry_url=registry.url)
        records, decoded, hanging = read_avro_output(bootstrap, output, {"url": registry.url})
        registered = Counter(registry.requests)[("POST", f"/subjects/{output}-value/versions")]
    assert not hanging and registered == 1
    assert all(r.value[0] == 0 for r in records), "Confluent framing: magic byte 0"
    _exactly_once(testing.flatten(sent), decoded)


def test_format_eos(spark, bootstrap, names, tmp_path, orders):
    source, sent = orders
    output, _ = _run(format_eos, spark, bootstrap, names, tmp_path, source)
    _exactly_once(testing.flatten(sent), read_output(bootstrap, output))
    assert (tmp_path / "ckpt" / "eos-ledger").is_dir(), "no ledger beside the checkpoint"


def test_connect(connect, bootstrap, names, tmp_path, orders):
    source, sent = orders
    output, _ = _run(connect_example, connect, bootstrap, names, tmp_path, source)
    _exactly_once([v.upper() for v in testing.flatten(sent)], read_output(bootstrap, output))
