"""eos: exactly-once Kafka output for Spark Structured Streaming.

df.writeStream.foreachBatch(eos.sink(config)).start()
df.writeStream.format("eos").option("kafka.bootstrap.servers", ...).option("eos.app.id", ...).start()
"""

from typing import TYPE_CHECKING

from eos._core._spec import Commit
from eos._core._stats import BatchSummary
from eos._log import Formatter as LogFormatter
from eos._spark._decode import from_confluent_avro, from_confluent_json, from_confluent_protobuf
from eos._spark._realtime import ForeachWriter
from eos._spark._rows_to_parts import place
from eos._version import __version__ as __version__
from eos._write import write
from eos.config import AT_LEAST_ONCE, EXACTLY_ONCE, Config
from eos.errors import (
    AuthenticationError,
    BatchSchemaError,
    BrokerUnreachableError,
    ChangelogError,
    ConfigError,
    DeliveryFailedError,
    DeserializationError,
    EosError,
    FatalError,
    FencedError,
    ForeignOffsetError,
    InputCoordinateError,
    InputGapError,
    InputOrderError,
    KafkaClientError,
    NondeterministicBatchError,
    OutputTypeError,
    PartTooLargeError,
    ProcessError,
    ProduceError,
    RecordError,
    RetriableError,
    SchemaRegistryError,
    SerializationError,
    StoreLockedError,
    TooManyDeadLettersError,
    TopicNotFoundError,
    TransactionAbortableError,
    TransactionInDoubtError,
    TransactionTimeoutError,
)
from eos.records import Output
from eos.session import read_stream, register, spark_session, starting_offsets, with_input_column
from eos.sink import Sink, sink
from eos.state import BytesSerde, JsonSerde, Serde, State, Store, StoreSpec, StrSerde

#: `df.writeStream.foreach(eos.foreach_writer(config))`, e.g. in real-time mode (see `ForeachWriter`).
foreach_writer = ForeachWriter


__all__ = [
    "MetricsListener",
    "AuthenticationError",
    "AT_LEAST_ONCE",
    "EXACTLY_ONCE",
    "BatchSchemaError",
    "BatchSummary",
    "BrokerUnreachableError",
    "BytesSerde",
    "ChangelogError",
    "Commit",
    "Config",
    "ConfigError",
    "DeliveryFailedError",
    "DeserializationError",
    "EosError",
    "FatalError",
    "FencedError",
    "ForeachWriter",
    "ForeignOffsetError",
    "InputCoordinateError",
    "InputGapError",
    "InputOrderError",
    "JsonSerde",
    "KafkaClientError",
    "LogFormatter",
    "Output",
    "place",
    "OutputTypeError",
    "ProcessError",
    "ProduceError",
    "RecordError",
    "RetriableError",
    "SchemaRegistryError",
    "Serde",
    "SerializationError",
    "Sink",
    "State",
    "Store",
    "StoreSpec",
    "StoreLockedError",
    "NondeterministicBatchError",
    "PartTooLargeError",
    "StrSerde",
    "TooManyDeadLettersError",
    "TopicNotFoundError",
    "TransactionAbortableError",
    "TransactionInDoubtError",
    "TransactionTimeoutError",
    "foreach_writer",
    "read_stream",
    "from_confluent_avro",
    "from_confluent_json",
    "from_confluent_protobuf",
    "register",
    "sink",
    "write",
    "spark_session",
    "starting_offsets",
    "with_input_column",
]

if TYPE_CHECKING:  # for type checkers and the API docs; at run time `__getattr__` imports it
    from eos._spark._listener import MetricsListener


def __getattr__(name: str):
    # MetricsListener subclasses pyspark's StreamingQueryListener: imported on first use, so that
    # `import eos` (the CLI, every Python worker) does not load pyspark.sql for it
    if name == "MetricsListener":
        from eos._spark._listener import MetricsListener

        return MetricsListener
    raise AttributeError(f"module 'eos' has no attribute {name!r}")
