"""What a task is shipped: `TaskSpec` (one micro-batch's config and layout) with its `Functions` (the user's
functions and stores, checked once for every entry point), and `Commit`, what `on_commit` receives."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import pyarrow as pa

from eos._core import _input, _rows
from eos._core._arrow import Layout
from eos.config import Config
from eos.errors import ConfigError
from eos.state import StoreSpec

Process = Callable[[Any, Any], Any]
ProcessBatch = Callable[[pa.RecordBatch, Any], Any]


@attrs.frozen
class Commit:
    """What `on_commit` receives after each committed transaction (or at_least_once offset commit)
    of one input topic-partition, on the executor (Samza's checkpoint listener).

    Fields:

    - `app_id`: the app's `app_id` (for `eos.write`, the job's `<app_id>.job.<job_id>`).
    - `topic`: the input topic. Where rows are written in parts (`input_mode="any"`, `eos.write`), the
      app's progress topic, `<app_id>-eos-parts`.
    - `partition`: the input partition (in parts: the part's number).
    - `offset`: the committed input offset: the next record to process (in parts: the batch id + 1).
    - `batch_id`: the Spark micro-batch id (the epoch id under `eos.foreach_writer`, 0 for `eos.write`).
    - `transactional_id`: the producer's `transactional.id` that committed; None under at_least_once.
    - `records`: the input records the transaction covered, dead letters included.
    - `outputs`: the output records it committed (not counting dead letters).
    - `seconds`: how long the commit took: the state changelog sent, the producer flushed and its
      deliveries checked, the offset committed, the local state stores updated.
    - `dead_letters`: of `records`, how many went to the dead-letter topic instead
      (`on_error="dead_letter"`).
    """

    app_id: str
    topic: str
    partition: int
    #: the committed input offset: the next record to process
    offset: int
    batch_id: int
    transactional_id: str | None
    records: int
    outputs: int
    seconds: float
    #: of `records`, how many went to the dead-letter topic instead (on_error="dead_letter")
    dead_letters: int = 0


OnCommit = Callable[[Commit], None]

_STORE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


@attrs.frozen
class Functions:
    """A sink's functions and the stores they use, as every entry point takes them (`eos.sink`,
    `eos.register`, `eos.foreach_writer`): checked once (`of`), then carried by each TaskSpec."""

    process: Process | None = None
    process_batch: ProcessBatch | None = None
    stores: dict[str, StoreSpec] = attrs.field(factory=dict)
    on_commit: OnCommit | None = None
    #: what a struct value of a row `process` sees becomes: Spark's `Row`, handed in by each entry point
    struct: _rows.Struct = dict

    @classmethod
    def of(
        cls,
        process: Process | None = None,
        process_batch: ProcessBatch | None = None,
        stores: Mapping[str, StoreSpec | str] | None = None,
        on_commit: OnCommit | None = None,
        struct: _rows.Struct = dict,
    ) -> Functions:
        """Checked: one of process / process_batch, store names that can name topics and files, and
        each store as a StoreSpec (a value serde name stands for one)."""
        if process is not None and process_batch is not None:
            raise ValueError("pass process= (one row at a time) or process_batch= (Arrow batches), not both")
        specs = {
            name: spec if isinstance(spec, StoreSpec) else StoreSpec(value_serde=spec)
            for name, spec in (stores or {}).items()
        }
        for name in specs:
            if not isinstance(name, str) or not _STORE_NAME.match(name) or len(name) > 100:
                raise ConfigError(
                    "stores",
                    f"store name {name!r} must be 1-100 characters of letters, digits, '.', '_' or '-' (it"
                    " names the store's changelog topic and files)",
                )
        if specs and process is None and process_batch is None:
            raise ValueError("state stores are used by a process function: pass process= or process_batch=")
        return cls(process, process_batch, specs, on_commit, struct)

    @property
    def any(self) -> bool:
        """Whether a function sees the rows (else the rows are the outputs, passed through)."""
        return self.process is not None or self.process_batch is not None


@attrs.frozen
class TaskSpec:
    """Everything a task needs to write one micro-batch; built by the sink, shipped to the executors."""

    config: Config
    batch_id: int
    layout: Layout
    functions: Functions = attrs.field(factory=Functions)
    #: whether a task checks that no input before its first row of a partition reached another task
    #: (`format("eos")`, which cannot regroup; see `eos._core._input`)
    check_input: bool = False
    #: with `check_input`: a partition with nothing committed fails instead of trusting the source's
    #: start (the Connect sink, which regroups the batch instead)
    start_known: bool = False
    #: the streaming query's id, which `batch_id` belongs to (`format("eos")`)
    query: str | None = None
    #: what each row's input coordinates are checked against before anything is written or skipped
    #: (`eos._core._input.check_rows`); None: the caller built the rows itself (tests, tools)
    provenance: _input.Provenance | None = None
