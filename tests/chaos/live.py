"""The live consumer of a chaos run: a read_committed consumer following the output while the faults
happen, feeding a checker as records arrive, so that a duplicate or a gap visible only mid-run is caught
too (the final comparison reads the output once more at the end)."""

from __future__ import annotations

import threading
import time
import uuid

from confluent_kafka import Consumer, TopicPartition

from eos import testing
from eos.testing import HistoryChecker, OutputRecord


class LiveChecker(threading.Thread):
    """A read_committed consumer following the output topic while the faults happen.

    It reconnects after each broker restart and after STALL_SECONDS without a record, resuming where it
    was: an assign()ed librdkafka consumer can stop fetching for good after a broker restart
    (confluentinc/librdkafka#5153; seen here as a live consumer stuck at a quarter of the output).
    """

    STALL_SECONDS = 20.0

    def __init__(self, bootstrap: str, topic: str, partitions: int, checker: HistoryChecker):
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.checker = checker
        self.markers: dict[int, set[str]] = {p: set() for p in range(partitions)}
        self.next_offsets = dict.fromkeys(range(partitions), 0)
        self.reconnects = 0
        self._reconnect = threading.Event()
        self._stopped = threading.Event()

    def _connect(self) -> Consumer:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"chaos-live-{uuid.uuid4().hex}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "log_level": 2,  # broker restarts are expected: no connection-refused noise
            }
        )
        consumer.assign([TopicPartition(self.topic, p, o) for p, o in self.next_offsets.items()])
        return consumer

    def run(self) -> None:
        consumer, last_record = self._connect(), time.monotonic()
        while not self._stopped.is_set():
            if self._reconnect.is_set() or time.monotonic() - last_record > self.STALL_SECONDS:
                self._reconnect.clear()
                consumer.close()
                consumer, last_record = self._connect(), time.monotonic()
                self.reconnects += 1
            msg = consumer.poll(0.5)
            if msg is None or (msg.error() and not msg.error().fatal()):
                continue  # broker restarts show up as transient transport errors
            last_record = time.monotonic()
            self.next_offsets[msg.partition()] = msg.offset() + 1
            headers = tuple(msg.headers() or ())
            marker = next((v.decode() for k, v in headers if k == testing.MARKER_HEADER), None)
            if marker is not None:
                self.markers[msg.partition()].add(marker)
                continue
            self.checker.add(OutputRecord(msg.partition(), msg.offset(), msg.key(), msg.value(), headers))
        consumer.close()

    def reconnect(self) -> None:
        self._reconnect.set()

    def wait_marker(self, marker: str, timeout: float) -> list[int]:
        """Wait until `marker` is visible in every partition; returns the partitions where it is not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not all(marker in m for m in self.markers.values()):
            time.sleep(0.1)
        return [p for p, m in self.markers.items() if marker not in m]

    def stop(self) -> None:
        self._stopped.set()
        self.join(30)
