"""`eos offsets reset` and the next run (real broker, real Spark): a reset that sets the committed offsets
back is honoured by a run that reads from the new offsets, and refused, nothing written or skipped, by a
run that resumes past them (Spark's Kafka source resumes from its checkpoint). Before, a restart on the
same checkpoint under foreachBatch skipped the records between silently and committed past them."""

from __future__ import annotations

import json

import pytest
from conftest import run_query

import eos
from eos import cli, testing
from eos._kafka import _offsets

PER_PARTITION, BACK, MORE = 300, 50, 100


def _write(spark, config: eos.Config, source: str, checkpoint, api: str) -> None:
    if api == "sink":
        run_query(spark, config, [source], checkpoint)
        return
    writer = eos.read_stream(spark, config, [source]).writeStream.format("eos")
    options = {
        "kafka.bootstrap.servers": config.bootstrap_servers,
        "topic": config.output_topic,
        "eos.app.id": config.app_id,
        "eos.processing.guarantee": config.processing_guarantee,
        "checkpointLocation": str(checkpoint),
    }
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.trigger(availableNow=True).start().awaitTermination()


def _reset(bootstrap: str, app_id: str, *target: str) -> None:
    assert (
        cli.main(["--bootstrap-server", bootstrap, "offsets", "reset", "--app", app_id, *target, "--execute"])
        == 0
    )


@pytest.mark.parametrize(
    "api,path",
    [
        ("sink", "jvm"),
        pytest.param("sink", "python", marks=pytest.mark.long),
        pytest.param("format_eos", "python", marks=pytest.mark.long),
    ],
)
def test_a_reset_back_is_refused_on_the_old_checkpoint_and_honoured_on_a_new_one(
    spark, bootstrap, names, tmp_path, api, path
):
    """2 partitions x 300 records written; `eos offsets reset --shift -50`; 100 more records each. On the
    old checkpoint: InputGapError naming the gap, nothing written, the offsets as the reset left them.
    The error's first advice, a new checkpoint: records 250-399 of each partition written once more, in
    order. (Before: the run on the old checkpoint exited 0, wrote 300-399 only and committed 400.)"""
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 2)
    testing.create_topic(bootstrap, output, 1)  # one output partition: each input partition's order shows
    testing.produce_sequence(bootstrap, source, 2, PER_PARTITION)
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
        data_path=path,
    )
    _write(spark, config, source, tmp_path / "ckpt", api)
    _reset(bootstrap, config.app_id, "--shift", str(-BACK))
    testing.produce_sequence(bootstrap, source, 2, MORE, start=PER_PARTITION)
    back = PER_PARTITION - BACK
    tps = [(source, 0), (source, 1)]
    stamps = _offsets.committed_entries(config, tps)
    assert {tp: (e.offset, _offsets.operator_reset(e.metadata)) for tp, e in stamps.items()} == {
        tp: (back, (True, PER_PARTITION)) for tp in tps
    }

    with pytest.raises(Exception, match="InputGapError") as info:
        _write(spark, config, source, tmp_path / "ckpt", api)
    message = str(info.value)
    assert f"set its committed offset to {back} (from {PER_PARTITION})" in message, message[-2000:]
    assert f"resumes it at offset {PER_PARTITION}" in message and "new checkpointLocation" in message
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    assert (len(records), hanging) == (2 * PER_PARTITION, []), "nothing was written"
    assert {tp: e.offset for tp, e in _offsets.committed_entries(config, tps).items()} == dict.fromkeys(
        tps, back
    )

    _write(spark, config, source, tmp_path / "new-ckpt", api)
    records, hanging = testing.read_topic(bootstrap, output, marker=testing.write_markers(bootstrap, output))
    written = {
        p: [testing.parse_value(r.value)[2] for r in records if testing.parse_value(r.value)[1] == p]
        for p in (0, 1)
    }
    expected = list(range(PER_PARTITION)) + list(range(back, PER_PARTITION + MORE))
    assert (written, hanging) == ({0: expected, 1: expected}, [])


@pytest.mark.long  # make chaos: make test runs the refusal and the new checkpoint above
def test_a_reset_the_error_names_to_skip_the_gap_is_honoured_on_the_old_checkpoint(
    spark, bootstrap, names, tmp_path
):
    """The error's other advice, `--to` where the query resumes: the records between are skipped on
    purpose, the query goes on on its checkpoint."""
    source, output = names("in"), names("out")
    testing.create_topic(bootstrap, source, 1)
    testing.create_topic(bootstrap, output, 1)
    sent = testing.produce_sequence(bootstrap, source, 1, PER_PARTITION)
    config = eos.Config(
        bootstrap_servers=bootstrap,
        app_id=names("app"),
        output_topic=output,
        processing_guarantee="exactly_once",
    )
    run_query(spark, config, [source], tmp_path / "ckpt")
    _reset(bootstrap, config.app_id, "--to", "earliest")
    more = testing.produce_sequence(bootstrap, source, 1, MORE, start=PER_PARTITION)
    with pytest.raises(Exception, match="InputGapError") as info:
        run_query(spark, config, [source], tmp_path / "ckpt")
    advice = json.loads(str(info.value).split("--to '")[1].split("'")[0])
    assert advice == {source: {"0": PER_PARTITION}}
    _reset(bootstrap, config.app_id, "--to", json.dumps(advice))
    run_query(spark, config, [source], tmp_path / "ckpt")
    result = testing.verify_exactly_once(bootstrap, output, testing.flatten({0: sent[0] + more[0]}))
    assert result.exactly_once, result
