"""The CLI's admin calls (`eos._kafka._admin`) fail with eos errors that `eos.cli._broker.exit_codes`
makes exit codes of: what a broker answers, or does not, becomes the code and the one-line message the
CLI prints. A fake admin client plays the broker; no broker needed."""

from __future__ import annotations

import concurrent.futures
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

import eos
from eos._kafka import _clients
from eos.cli._base import EXIT_ERROR, EXIT_REFUSED, EXIT_UNREACHABLE, CliError
from eos.cli._broker import Broker


class Answer:
    """A future that answers `value`, raises `error` (a KafkaError or an exception), or never answers."""

    def __init__(self, value=None, error=None) -> None:
        self.value, self.error = value, error

    def result(self, timeout=None):
        if isinstance(self.error, KafkaError):
            raise KafkaException(self.error)
        if self.error is not None:
            raise self.error
        return self.value


class FakeAdmin:
    """`answer` to every call; DescribeGroups (the coordinator check, members) `described`."""

    def __init__(self, answer: Answer, described: Answer) -> None:
        self.answer, self.described = answer, described

    def describe_consumer_groups(self, groups, request_timeout=None):
        return {g: self.described for g in groups}

    def list_consumer_group_offsets(self, request, require_stable=False, request_timeout=None):
        return {request[0].group_id: self.answer}

    def alter_consumer_group_offsets(self, request, request_timeout=None):
        return {request[0].group_id: self.answer}

    def list_offsets(self, request, isolation_level=None, request_timeout=None):
        return {tp: self.answer for tp in request}


def _group(*members):
    return SimpleNamespace(members=list(members))


def _partitions(*tps):
    return SimpleNamespace(topic_partitions=list(tps))


def _tp(partition, offset=-1001, error=None):
    return SimpleNamespace(topic="t", partition=partition, offset=offset, metadata="", error=error)


@pytest.fixture
def broker(monkeypatch):
    def with_answer(answer: Answer, described: Answer | None = None) -> Broker:
        fake = FakeAdmin(answer, described or Answer(_group()))
        monkeypatch.setattr(_clients, "admin", lambda config: fake)
        config = eos.Config(bootstrap_servers="127.0.0.1:1", app_id="cli", output_topic="out")
        return Broker(config, 5)

    return with_answer


GROUP_READ = "reading the committed offsets of group 'g'"
NON_EMPTY = KafkaError(KafkaError.NON_EMPTY_GROUP)
TRANSPORT = KafkaError(KafkaError._TRANSPORT)


@pytest.mark.parametrize(
    ("call", "answer", "code", "message"),
    [
        (
            lambda b: b.committed("g"),
            Answer(error=concurrent.futures.TimeoutError()),
            EXIT_UNREACHABLE,
            f"{GROUP_READ}: no answer from the broker within 5s",
        ),
        (
            lambda b: b.committed("g"),
            Answer(error=TRANSPORT),
            EXIT_UNREACHABLE,
            f"{GROUP_READ}: no answer from the broker within 5s ({TRANSPORT.str()})",
        ),
        # only a change of the offsets is refused for the group's members; a read failing so is an error
        (lambda b: b.committed("g"), Answer(error=NON_EMPTY), EXIT_ERROR, f"{GROUP_READ}: {NON_EMPTY.str()}"),
        (
            lambda b: b.alter("g", {("t", 0): 0}),
            Answer(error=NON_EMPTY),
            EXIT_REFUSED,
            f"changing the offsets of group 'g': refused by the broker: {NON_EMPTY.str()}",
        ),
        (
            lambda b: b.alter("g", {("t", 0): 0}),
            Answer(_partitions(_tp(0, error=NON_EMPTY))),
            EXIT_REFUSED,
            f"changing the offsets of group 'g': refused by the broker: {NON_EMPTY.str()}",
        ),
        (
            lambda b: b.alter("g", {("t", 0): 0}),
            Answer(_partitions(_tp(0, error=TRANSPORT))),
            EXIT_ERROR,
            f"changing the offsets of group 'g' failed for t/0: {TRANSPORT.str()}",
        ),
        (
            lambda b: b.unstable("g", [("t", 0)]),
            Answer(_partitions(_tp(0, error=TRANSPORT))),
            EXIT_ERROR,
            f"reading the offset of t/0 for group 'g': {TRANSPORT.str()}",
        ),
        (
            lambda b: b.log_offsets([("t", 0)], "latest"),
            Answer(error=KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)),
            EXIT_ERROR,
            "listing the offsets of t/0: " + KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED).str(),
        ),
    ],
)
def test_a_failed_admin_call_is_the_exit_code_and_message_the_cli_prints(broker, call, answer, code, message):
    with pytest.raises(CliError) as failed:
        call(broker(answer))
    assert (failed.value.code, str(failed.value)) == (code, message)


def test_answers_that_are_not_errors_to_the_cli(broker):
    missing = Answer(error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    assert broker(missing).log_offsets([("t", 0)], "earliest") == {("t", 0): None}
    assert broker(Answer(), Answer(error=KafkaError(KafkaError.GROUP_ID_NOT_FOUND))).members("g") == []
    member = SimpleNamespace(client_id="c", host="/10.0.0.1")
    assert broker(Answer(), Answer(_group(member))).members("g") == ["c@/10.0.0.1"]
    pending = Answer(error=KafkaError(KafkaError.UNSTABLE_OFFSET_COMMIT))
    assert broker(pending).unstable("g", [("t", 1), ("t", 0)]) == [("t", 0), ("t", 1)]
    held = Answer(_partitions(_tp(0), _tp(1, error=KafkaError(KafkaError.UNSTABLE_OFFSET_COMMIT))))
    assert broker(held).unstable("g", [("t", 0), ("t", 1)]) == [("t", 1)]
