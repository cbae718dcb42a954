"""`eos.write(df, config, job_id)`: a batch (not streaming) DataFrame written exactly once per job id, as
one batch in parts (`eos._spark._parts_writer`, the engine `input_mode="any"` micro-batches use), after
the same pre-flight as every way in."""

from __future__ import annotations

import re
import time

from eos._core._spec import OnCommit, Process, ProcessBatch
from eos._core._stats import BatchSummary
from eos._log import get_logger
from eos._spark import _metrics
from eos._spark._parts_writer import PartsWriter
from eos._spark._preflight import JOB_BATCH_ID, Preflight, functions, job_config
from eos.config import Config
from eos.errors import ConfigError, NondeterministicBatchError
from eos.sink import announce, ms_since, raised_in_task


def write(
    df,
    config: Config,
    job_id: str,
    process: Process | None = None,
    *,
    process_batch: ProcessBatch | None = None,
    on_commit: OnCommit | None = None,
) -> BatchSummary:
    """Write a batch (not streaming) DataFrame exactly once per `job_id`: a re-run of a failed job with
    the same id writes only what its earlier runs did not commit, and fails with
    NondeterministicBatchError, writing nothing more, where the DataFrame now yields other rows for a
    part they committed. The rows are written in `config.parts` parts as `input_mode="any"` writes a
    micro-batch (whatever `config.input_mode` says), under the app id `<app_id>.job.<job_id>`: its own
    progress topic (`eos parts show --app <app_id> --job <job_id>`), group and transactional ids. Returns
    the job's BatchSummary.

    Parameters:

    - `df`: the batch DataFrame to write; a streaming one is refused (write it with
      `df.writeStream.foreachBatch(eos.sink(config))`). Its columns are checked as a micro-batch's are.
    - `config`: the `eos.Config` of the app the job belongs to; its `input_mode` is not used (the rows
      are always written in parts).
    - `job_id`: names the job: letters, digits, `.`, `_` or `-`, none of its dot-separated words `job`,
      and `<app_id>.job.<job_id>` at most 200 characters. A re-run with the same id finishes the job.
    - `process`: a function `process(row, state)` per row, as `eos.sink`'s; `state` has no stores here.
      None (the default): each row is itself the output.
    - `process_batch`: instead of `process` (not both), a function `process_batch(batch, state)` per
      Arrow record batch of a part's rows, as `eos.sink`'s.
    - `on_commit`: called with an `eos.Commit` on the executor after each part is committed; its
      `topic` is the job's progress topic and its `partition` the part. None: nothing is called.
    """
    if getattr(df, "isStreaming", False):
        raise ConfigError(
            "df", "is a streaming DataFrame: write it with df.writeStream.foreachBatch(eos.sink(config))"
        )
    job = job_config(config, job_id)
    log = get_logger("eos.sink", app_id=job.app_id, guarantee=config.processing_guarantee)
    if not config.exactly_once:
        log.warning(
            "batch job at least once",
            job_id=job_id,
            detail="processing_guarantee is at_least_once: a re-run skips the parts committed, but a part"
            " cut short by a crash is written again in full (duplicates); set exactly_once",
        )
    fns = functions(process, process_batch, None, on_commit)
    started = time.monotonic()
    preflight = Preflight(job, fns, "a batch job")
    layout, columns = preflight.columns(df.dtypes)  # D1
    driver = {"layout_ms": ms_since(started)}  # BatchSummary.driver
    mark = time.monotonic()
    preflight.topics(log)  # D2
    lags = None
    if job.metrics_port is not None:
        _metrics.enable(job.metrics_port)
        lags = _metrics.Lags()
    driver["topics_ms"] = ms_since(mark)
    try:
        stats = PartsWriter(job, fns).write(df, JOB_BATCH_ID, layout, columns, log)  # P0-P2
    except Exception as exc:
        # A part's refusal reaches the driver as the text of a failed Spark task: raised as itself.
        refusal = raised_in_task(exc, NondeterministicBatchError)
        if refusal is None or isinstance(exc, NondeterministicBatchError):
            raise
        part = re.search(r"\bpart (\d+)\b", refusal)
        raise NondeterministicBatchError(
            f"job {job_id!r}: {refusal.split(': ', 1)[1]}",
            batch_id=JOB_BATCH_ID,
            part=int(part.group(1)) if part else -1,
        ) from exc
    seconds = time.monotonic() - started
    summary = BatchSummary.of(
        JOB_BATCH_ID, config.processing_guarantee, stats, seconds, regrouped=True, driver=driver
    )
    announce(job, summary, log, lags)  # P3
    return summary
