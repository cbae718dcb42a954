"""eos's events go through Python's `logging` on the driver and in the executors' Python workers: a
`dictConfig` file named by EOS_LOG_CONFIG sends both to one handler, once each."""

from __future__ import annotations

import json
import re
from collections import Counter

from conftest import finish, seed, start_pipeline

from eos import testing


def test_a_logging_config_gets_the_drivers_and_the_workers_events_once_each(broker, names, tmp_path):
    source, output, sent = seed(broker.bootstrap_servers, names, 100)
    out, conf = tmp_path / "eos.log", tmp_path / "logging.json"
    conf.write_text(
        json.dumps(
            {
                "version": 1,
                "formatters": {"plain": {"format": "%(process)d %(name)s %(levelname)s %(message)s"}},
                "handlers": {
                    "file": {"class": "logging.FileHandler", "filename": str(out), "formatter": "plain"}
                },
                "loggers": {"eos": {"level": "INFO", "handlers": ["file"]}},
            }
        )
    )
    summaries = tmp_path / "summaries.jsonl"
    proc = start_pipeline(
        broker.bootstrap_servers,
        names("log-app"),
        source,
        output,
        tmp_path / "ckpt",
        summaries,
        # the workers' events are the Python path's: the JVM data path's tasks log through Spark's log4j
        {"EOS_LOG_CONFIG": str(conf), "EOS_PROCESSING_GUARANTEE": "exactly_once", "EOS_DATA_PATH": "python"},
        max_offsets=200,
    )
    finish(proc)
    result = testing.verify_exactly_once(broker.bootstrap_servers, output, testing.flatten(sent))
    assert result.exactly_once, result

    lines = out.read_text().splitlines()
    batches = [line for line in lines if " eos.sink INFO batch written " in line]
    partitions = [line for line in lines if " eos.task INFO partition written " in line]
    assert len(batches) == 2, lines  # 400 records, 200 a trigger
    assert {int(line.split()[0]) for line in batches} == {proc.proc.pid}  # the driver's
    assert proc.proc.pid not in {int(line.split()[0]) for line in partitions}  # the workers'
    written = Counter(
        (re.search(r" batch_id=(\d+)", line).group(1), re.search(r" partition=(\d+)", line).group(1))
        for line in partitions
    )
    assert sorted(written) == [(b, p) for b in ("0", "1") for p in ("0", "1", "2", "3")], lines
    assert set(written.values()) == {1}, written  # nothing twice
    stderr = summaries.with_suffix(".log").read_text()
    assert "partition written" not in stderr and "batch written" not in stderr  # nor on stderr
