"""input_mode "any" (eos._core._parts) without Spark or a broker: the digest, the progress record, the names,
the config and the batch check of the mode."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import eos
from eos import _names
from eos._core._parts import Digest, Progress, RowPlacement
from eos._kafka import _offsets
from eos._spark._preflight import batch_layout
from eos.errors import BatchSchemaError, ConfigError
from eos.sink import Sink
from tests.support.configs import config as base_config

config = partial(base_config, input_mode="any")


def digest(*chunks: list[int]) -> Digest:
    d = Digest()
    for chunk in chunks:
        d = d.plus(np.array(chunk, dtype=np.int64))
    return d


def test_digest_ignores_order_and_chunking_but_counts_every_row():
    assert digest([5, -3, 7]) == digest([7], [5, -3]) == digest([], [-3, 7, 5])
    assert digest([5, 5]) != digest([5]) != digest([])  # a sum: equal rows do not cancel out
    assert digest([5, 5]).rows == 2
    # One row changed changes both sums; two rows trading values keep the first sum, not the second.
    assert digest([1, 4]).sum == digest([2, 3]).sum and digest([1, 4]) != digest([2, 3])


def test_digest_sums_wrap_at_64_bits():
    big = np.iinfo(np.int64).min
    d = digest([big, big, -1])
    assert d.sum == (2 * (1 << 63) + (1 << 64) - 1) % (1 << 64)
    assert len(d.text()) == 32


def test_progress_round_trips_through_the_offset_metadata_and_fits_the_broker_limit():
    cfg = config()
    progress = Progress(batch_id=41, placement=RowPlacement(8, "key"), digest=digest([1, 2, 3]))
    metadata = progress.metadata(cfg, part=5)
    assert metadata.startswith(_offsets.stamp(cfg) + ";mode=any;batch=41;part=5;parts=8;by=key;rows=3")
    assert _offsets.is_own(cfg, metadata)  # stamped as this app's: check_stamps accepts it
    assert Progress.of(_offsets.Committed(42, metadata)) == progress
    assert len(metadata.encode()) < 4096  # offset.metadata.max.bytes' default
    unknown = Progress(batch_id=0, placement=RowPlacement(None, None), digest=Digest())  # format("eos")
    assert Progress.of(_offsets.Committed(1, unknown.metadata(cfg, part=0))) == unknown
    # part_columns with characters the stamp uses itself survive the round trip
    odd = Progress(batch_id=1, placement=RowPlacement(4, "columns:a;b=c,d e"), digest=Digest())
    assert Progress.of(_offsets.Committed(2, odd.metadata(cfg, part=0))).placement.columns == ["a;b=c", "d e"]


def test_a_progress_record_from_before_placements_were_recorded_compares_by_parts_only():
    old = _offsets.stamp(config()) + ";mode=any;batch=3;part=0;parts=4;rows=0;digest=" + "0" * 32
    assert Progress.of(_offsets.Committed(4, old)).placement == RowPlacement(4, None)


def test_an_input_offset_stamp_is_no_part_progress():
    assert Progress.of(_offsets.Committed(7, _offsets.stamp(config()))) is None
    assert Progress.of(None) is None


def test_part_names_cannot_meet_input_partition_names():
    assert _names.part_transactional_id("app", 3) == "app:#part:3"
    assert "#" not in _names.transactional_id("app", "topic", 3)  # '#' is in no legal topic name
    assert _names.parts_topic("app") == "app-eos-parts"


def test_config_names_the_mode_and_its_settings():
    assert eos.Config(bootstrap_servers="b:1", app_id="a", output_topic="o").input_mode == "kafka"
    with pytest.raises(ConfigError, match="input_mode.*'kafka'.*'any'"):
        config(input_mode="aggregate")
    with pytest.raises(ConfigError, match="parts"):
        config(parts=0)
    with pytest.raises(ConfigError, match="part_columns"):
        config(part_columns=" , ")
    props = eos.Config.from_properties(
        {"bootstrap.servers": "b:1", "app.id": "a", "output.topic": "o", "input.mode": "any", "parts": "6"}
    )
    assert (props.input_mode, props.parts) == ("any", 6)


AGGREGATE = [("key", "binary"), ("value", "binary")]
KAFKA = [
    ("key", "binary"),
    ("value", "binary"),
    ("topic", "string"),
    ("partition", "int"),
    ("offset", "bigint"),
]


def test_any_mode_takes_a_batch_without_input_coordinates():
    layout, columns = batch_layout(config(), AGGREGATE, has_process=False)
    assert columns == ["value", "key"]
    assert (layout.value, layout.key) == ("value", "key")


def test_each_mode_names_the_other_when_the_columns_fit_it():
    with pytest.raises(BatchSchemaError, match="input_mode='kafka'"):
        batch_layout(config(), KAFKA, has_process=False)
    kafka_mode = config(input_mode="kafka")
    with pytest.raises(BatchSchemaError, match="batch has no 'topic' column.*input_mode='any'"):
        batch_layout(kafka_mode, AGGREGATE, has_process=False)


def test_any_mode_refuses_state_stores_saying_why():
    with pytest.raises(ConfigError, match="no state stores.*Spark's own state"):
        Sink(config(), process=lambda row, state: None, stores={"counts": "json"})
    Sink(config(), process=lambda row, state: None)  # process without stores is fine
