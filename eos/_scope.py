"""What every part of a partition task shares: one input topic-partition of one micro-batch."""

from __future__ import annotations

import attrs

from eos._log import get_logger
from eos.config import Config


@attrs.frozen
class PartitionScope:
    """Handed to the task's checkpoint and state instead of the same fields to each constructor; `log`
    has the app id, topic, partition, transactional id and batch id bound."""

    config: Config
    topic: str
    partition: int
    batch_id: int
    transactional_id: str | None
    log: object = attrs.field(eq=False, repr=False)
    #: the streaming query's id (kept in its checkpoint), which the batch id belongs to, and the offset of
    #: the task's first row of this input partition: where one task per input partition and batch is not
    #: the sink's to make (`format("eos")`), both are stamped on the committed offsets (`eos._core._input`)
    query: str | None = None
    first: int | None = None

    @classmethod
    def of(
        cls,
        config: Config,
        topic: str,
        partition: int,
        batch_id: int,
        query: str | None = None,
    ) -> PartitionScope:
        tid = config.transactional_id(topic, partition) if config.exactly_once else None
        log = get_logger(
            "eos.task",
            app_id=config.app_id,
            topic=topic,
            partition=partition,
            transactional_id=tid,
            batch_id=batch_id,
        )
        return cls(config, topic, partition, batch_id, tid, log, query)

    @property
    def where(self) -> str:
        """`topic/partition`, as messages name an input partition."""
        return f"{self.topic}/{self.partition}"
