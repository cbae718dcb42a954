"""Which producer wrote which offsets of a partition: record batch headers read with Kafka's Fetch request
itself, because no client library says it (librdkafka and Java's consumer hand out records, not their
batches' producer ids). `eos repair` needs it to copy back exactly the records of one aborted
transaction, among other producers' records and other aborted transactions.

A minimal client of the Kafka protocol: ApiVersions, then Fetch (versions 4 to 11, the newest the broker
has; none of them flexible), to the partition's leader as confluent-kafka's metadata names it, over
PLAINTEXT or SSL, with SASL/PLAIN where the client settings ask for it. A read_committed Fetch also
returns the aborted transactions of the range (producer id, first offset); a read_uncommitted one the
batches, of which only the header is read: producer id and epoch, whether transactional or a control
batch (a commit or abort marker), the offsets it holds. Records themselves are read with
confluent-kafka, which decompresses them.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
import tempfile
from collections.abc import Iterator

import attrs
from confluent_kafka import TIMESTAMP_CREATE_TIME, KafkaError, TopicPartition

from eos._kafka import _clients, _translate
from eos.config import Config
from eos.errors import KafkaClientError

_API_FETCH = 1
_API_VERSIONS = 18
_API_SASL_HANDSHAKE = 17
_API_SASL_AUTHENTICATE = 36
#: the Fetch versions read here: 4 has the isolation level and aborted transactions, 12 is flexible
_FETCH_VERSIONS = range(4, 12)
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # through the record count: 61 bytes
_CLIENT_ID = b"eos-repair"


@attrs.frozen
class Batch:
    """One record batch's header: offsets [first, last], who wrote it and what it is."""

    first: int
    last: int
    producer_id: int
    producer_epoch: int
    transactional: bool
    control: bool


@attrs.frozen
class Fetched:
    batches: tuple[Batch, ...]
    #: (producer id, first offset) of each aborted transaction in the range (read_committed fetches)
    aborted: tuple[tuple[int, int], ...]
    high_watermark: int


class _Buffer:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        values = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return values[0] if len(values) == 1 else values

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        text = self.data[self.at : self.at + n].decode()
        self.at += n
        return text

    def blob(self) -> bytes | None:
        n = self.take(">i")
        if n < 0:
            return None
        out = self.data[self.at : self.at + n]
        self.at += n
        return out


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _load_pem_chain(context: ssl.SSLContext, certificate: str, key: str) -> None:
    """A certificate and key given as PEM text: Python's ssl reads them from a file only (one only this
    user can read, removed at once)."""
    with tempfile.TemporaryDirectory() as home:
        path = os.path.join(home, "client.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + certificate.strip() + "\n")
        context.load_cert_chain(path)


class _Connection:
    """One connection to a broker, requests one at a time."""

    def __init__(self, settings: dict, host: str, port: int, timeout: float) -> None:
        protocol = str(settings.get("security.protocol", "plaintext")).lower()
        if protocol not in ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl"):
            raise KafkaClientError(f"security.protocol {protocol!r} is not one this reader speaks")
        self.sock = socket.create_connection((host, port), timeout=timeout)
        if protocol.endswith("ssl"):
            if settings.get("ssl.keystore.location"):
                raise KafkaClientError(
                    "ssl.keystore.location: this reader takes the client's certificate and key as PEM"
                    " (ssl.certificate.pem and ssl.key.pem, which Kafka's Java tools take too, or"
                    " ssl.certificate.location and ssl.key.location), not a PKCS#12 key store"
                )
            context = ssl.create_default_context(
                cafile=settings.get("ssl.ca.location"), cadata=settings.get("ssl.ca.pem")
            )
            if settings.get("ssl.certificate.location"):
                context.load_cert_chain(
                    settings["ssl.certificate.location"],
                    settings.get("ssl.key.location"),
                    settings.get("ssl.key.password"),
                )
            elif settings.get("ssl.certificate.pem") and settings.get("ssl.key.pem"):
                _load_pem_chain(context, str(settings["ssl.certificate.pem"]), str(settings["ssl.key.pem"]))
            if str(settings.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
                context.check_hostname = False
            self.sock = context.wrap_socket(self.sock, server_hostname=host)
        self.correlation = 0
        if protocol.startswith("sasl"):
            self._sasl(settings)

    def request(self, api: int, version: int, body: bytes) -> _Buffer:
        self.correlation += 1
        header = struct.pack(">hhi", api, version, self.correlation) + _string(_CLIENT_ID.decode())
        message = header + body
        self.sock.sendall(struct.pack(">i", len(message)) + message)
        size = struct.unpack(">i", self._read(4))[0]
        response = _Buffer(self._read(size))
        if response.take(">i") != self.correlation:
            raise KafkaClientError("a broker's answer does not match its request")
        return response

    def _read(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self.sock.recv(left)
            if not chunk:
                raise KafkaClientError("the broker closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _sasl(self, settings: dict) -> None:
        mechanism = str(settings.get("sasl.mechanism", settings.get("sasl.mechanisms", "GSSAPI"))).upper()
        if mechanism != "PLAIN":
            raise KafkaClientError(
                f"sasl.mechanism {mechanism} is not one this reader speaks (PLAIN, or no SASL)"
            )
        answer = self.request(_API_SASL_HANDSHAKE, 1, _string(mechanism))
        if answer.take(">h"):
            raise KafkaClientError(f"the broker refused SASL mechanism {mechanism}")
        token = (
            b"\0" + str(settings["sasl.username"]).encode() + b"\0" + str(settings["sasl.password"]).encode()
        )
        answer = self.request(_API_SASL_AUTHENTICATE, 0, struct.pack(">i", len(token)) + token)
        code, message = answer.take(">h"), answer.string()
        if code:
            raise KafkaClientError(f"the broker refused the credentials: {message}")

    def fetch_version(self) -> int:
        answer = self.request(_API_VERSIONS, 0, b"")
        if answer.take(">h"):
            raise KafkaClientError("the broker refused ApiVersions")
        for _ in range(answer.take(">i")):
            api, low, high = answer.take(">hhh")
            if api == _API_FETCH:
                usable = [v for v in _FETCH_VERSIONS if low <= v <= high]
                if usable:
                    return usable[-1]
        raise KafkaClientError(f"the broker takes none of Fetch versions {_FETCH_VERSIONS.start}-11")

    def close(self) -> None:
        self.sock.close()


class BatchReader:
    """Record batch headers of one partition, from its leader."""

    def __init__(self, config: Config, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self.timeout = config.operation_timeout_ms / 1000
        settings = _clients.consumer_settings(config)
        with _translate.translating(f"finding the leader of {topic}/{partition}"):
            metadata = _clients.watermark_consumer(config).list_topics(topic, timeout=self.timeout)
        leader = metadata.topics[topic].partitions[partition].leader
        broker = metadata.brokers[leader]
        self.connection = _Connection(settings, broker.host, broker.port, self.timeout)
        self.version = self.connection.fetch_version()

    def fetch(self, offset: int, read_committed: bool, max_bytes: int = 1 << 20) -> Fetched:
        """The batches from the one holding `offset` on (at most about `max_bytes`)."""
        v = self.version
        body = struct.pack(">iiii", -1, 500, 1, max_bytes) + struct.pack(">b", int(read_committed))
        if v >= 7:
            body += struct.pack(">ii", 0, -1)  # no fetch session
        partition = struct.pack(">i", self.partition)
        if v >= 9:
            partition += struct.pack(">i", -1)  # current leader epoch: not known
        partition += struct.pack(">q", offset)
        if v >= 5:
            partition += struct.pack(">q", -1)  # log start offset: a consumer's
        partition += struct.pack(">i", max_bytes)
        body += struct.pack(">i", 1) + _string(self.topic) + struct.pack(">i", 1) + partition
        if v >= 7:
            body += struct.pack(">i", 0)  # forgotten topics
        if v >= 11:
            body += _string("")  # rack
        answer = self.connection.request(_API_FETCH, v, body)
        answer.take(">i")  # throttle
        if v >= 7:
            code = answer.take(">h")
            answer.take(">i")
            if code:
                raise KafkaClientError(f"fetching {self.topic}/{self.partition}: error code {code}")
        for _ in range(answer.take(">i")):
            answer.string()
            for _ in range(answer.take(">i")):
                answer.take(">i")
                code, high = answer.take(">hq")
                answer.take(">q")  # last stable offset
                if v >= 5:
                    answer.take(">q")
                aborted = []
                count = answer.take(">i")
                for _ in range(max(count, 0)):
                    aborted.append(answer.take(">qq"))
                if v >= 11:
                    answer.take(">i")
                records = answer.blob() or b""
                if code:
                    raise KafkaClientError(
                        f"fetching {self.topic}/{self.partition} at {offset}: error code {code}"
                    )
                return Fetched(tuple(_batches(records)), tuple(aborted), high)
        raise KafkaClientError(f"fetching {self.topic}/{self.partition}: the broker returned no partition")

    def close(self) -> None:
        self.connection.close()


def _batches(records: bytes) -> Iterator[Batch]:
    """The whole batches of a Fetch response's records (a last one cut short by the size limit is not)."""
    at = 0
    while at + _BATCH_HEADER.size <= len(records):
        (base, length, _, magic, _, attributes, last_delta, _, _, producer, epoch, _, _) = (
            _BATCH_HEADER.unpack_from(records, at)
        )
        if at + 12 + length > len(records):
            return
        if magic == 2:
            yield Batch(
                base,
                base + last_delta,
                producer,
                epoch,
                bool(attributes & _ATTR_TRANSACTIONAL),
                bool(attributes & _ATTR_CONTROL),
            )
        at += 12 + length


def aborted_transaction_offsets(
    config: Config, topic: str, partition: int, witness: int
) -> tuple[int, list[int]]:
    """The producer id and the offsets of the records of the aborted transaction that wrote `topic`/
    `partition`'s offset `witness` (its last record there): the batches of its producer from the
    transaction's first offset (the read_committed Fetch's aborted transactions) up to `witness`."""
    reader = BatchReader(config, topic, partition)
    try:
        holding = next(
            (b for b in reader.fetch(witness, False).batches if b.first <= witness <= b.last), None
        )
        if holding is None or holding.control or not holding.transactional:
            raise KafkaClientError(f"{topic}/{partition}: offset {witness} is no transactional record")
        starts = [
            first
            for pid, first in reader.fetch(witness, True).aborted
            if pid == holding.producer_id and first <= witness
        ]
        if not starts:
            raise KafkaClientError(
                f"{topic}/{partition}: offset {witness} is in no aborted transaction (it committed, or"
                " its abort marker is not written yet)"
            )
        offsets: list[int] = []
        at = max(starts)
        while at <= witness:
            batches = reader.fetch(at, False).batches
            if not batches:
                raise KafkaClientError(f"{topic}/{partition}: no batch at offset {at}")
            for b in batches:
                if b.first > witness:
                    break
                if (b.producer_id, b.producer_epoch) == (holding.producer_id, holding.producer_epoch) and (
                    not b.control
                ):
                    offsets.extend(o for o in range(max(b.first, at), b.last + 1) if o <= witness)
            at = batches[-1].last + 1
        return holding.producer_id, offsets
    finally:
        reader.close()


@attrs.frozen
class Record:
    """A record as read back, to be written again as it was."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    #: epoch ms of its create time (None where the topic stamps log-append time: the copy gets its own)
    timestamp: int | None


def read_records(config: Config, topic: str, partition: int, offsets: list[int]) -> list[Record]:
    """The records at `offsets` of `topic`/`partition`, read_uncommitted (those of an aborted transaction
    too), in offset order."""
    wanted = set(offsets)
    if not wanted:
        return []
    where = f"reading back {topic}/{partition} at offsets {min(wanted)}-{max(wanted)}"
    consumer = _clients.witness_consumer(config, committed=False)
    timeout = config.operation_timeout_ms / 1000
    _translate.call(
        lambda: consumer.assign([TopicPartition(topic, partition, min(wanted))]),
        what=where,
        timeout_s=timeout,
    )
    found: list[Record] = []
    try:
        deadline = _translate.Deadline(timeout)
        while len(found) < len(wanted):
            if deadline.expired():
                raise _translate.translate_error(KafkaError(KafkaError._TIMED_OUT), where)
            with _translate.translating(where):
                messages = consumer.consume(500, timeout=0.5)
            for msg in messages:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise _translate.translate_error(err, where)
                if msg.offset() in wanted:
                    kind, stamp = msg.timestamp()
                    found.append(
                        Record(
                            msg.offset(),
                            msg.key(),
                            msg.value(),
                            tuple(msg.headers() or ()),
                            stamp if kind == TIMESTAMP_CREATE_TIME else None,
                        )
                    )
                if msg.offset() >= max(wanted):
                    break
            if found and found[-1].offset >= max(wanted):
                break
    finally:
        consumer.unassign()
    missing = wanted - {r.offset for r in found}
    if missing:
        raise KafkaClientError(f"{where}: {len(missing)} of them not read back (first {min(missing)})")
    return found
