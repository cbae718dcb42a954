"""Errors across the Spark boundary: a task's exception reaches the driver (or the Connect server) as
Spark's PythonException, whose text is the worker's traceback. The sink regroups a batch when, and only
when, a task raised `InputOrderError` (step 3a refused the batch as read); any other error is raised.
And `InputCoordinateError` is a RecordError like the others: `reason`, topic/partition/offset, `poison`."""

from __future__ import annotations

import traceback

import pytest
from pyspark.errors.exceptions.connect import PythonException

import eos
from eos.errors import InputCoordinateError, InputOrderError, ProcessError, RecordError
from eos.sink import Sink

#: how Spark (classic and Connect alike, PySpark 4.0) words a Python worker's exception
_HEADER = "\n  An exception was thrown from the Python worker. Please see the stack trace below.\n"


def _as_spark_reports(error: BaseException) -> PythonException:
    """`error`, raised in a task, as the driver receives it: its traceback in a PythonException's text."""
    try:
        raise error
    except BaseException as raised:  # noqa: BLE001 - formatted as the worker formats it
        text = "".join(traceback.format_exception(type(raised), raised, raised.__traceback__))
    return PythonException(message=_HEADER + text)


def _sink() -> Sink:
    return eos.sink(eos.Config(bootstrap_servers="127.0.0.1:1", app_id="app", output_topic="out"))


def _write_as_read(sink: Sink, monkeypatch, error: BaseException):
    def refused(*args, **kwargs):
        raise error

    monkeypatch.setattr(sink, "_write", refused)
    return sink._write_as_read(None, 7, None, [], None)


def test_a_task_that_raised_input_order_error_makes_the_sink_regroup(monkeypatch):
    sink = _sink()
    refused = InputOrderError("input record 3 did not reach it", topic="in", partition=0, offset=3)
    assert _write_as_read(sink, monkeypatch, _as_spark_reports(refused)) is None
    assert sink._regroup_unseen


def test_input_order_error_raised_in_this_process_makes_the_sink_regroup_too(monkeypatch):
    sink = _sink()
    refused = InputOrderError("input record 3 did not reach it", topic="in", partition=0, offset=3)
    assert _write_as_read(sink, monkeypatch, refused) is None
    assert sink._regroup_unseen


@pytest.mark.parametrize(
    "error",
    [
        # the user's process function names it in its own error: a ProcessError, not step 3a's refusal
        ProcessError(
            "process raised ValueError: expected an InputOrderError here", topic="in", partition=0, offset=3
        ),
        ValueError("eos.errors.InputOrderError is what the test wanted"),
    ],
    ids=["process-error-naming-it", "value-error-naming-it"],
)
def test_an_error_that_only_mentions_input_order_error_is_raised(monkeypatch, error):
    sink = _sink()
    reported = _as_spark_reports(error)
    assert "InputOrderError" in str(reported)
    with pytest.raises(PythonException) as info:
        _write_as_read(sink, monkeypatch, reported)
    assert info.value is reported
    assert not sink._regroup_unseen


def test_input_coordinate_error_is_a_record_error_with_a_reason():
    message = "column 'partition' does not hold the input coordinate of the record its row came from"
    error = InputCoordinateError(message, column="partition", topic="in", partition=4, offset=9)
    assert isinstance(error, RecordError)
    assert error.reason == message
    assert (error.column, error.topic, error.partition, error.offset) == ("partition", "in", 4, 9)
    assert error.poison is False
    # what the row claims is not a record's name, and nothing was begun: the message stands alone
    assert str(error) == message
    other = RecordError(message, topic="in", partition=4, offset=9)
    assert set(vars(other)) <= set(vars(error))
