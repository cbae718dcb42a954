"""Would reading a batch of Confluent-framed Avro bodies as one Avro block beat fastavro's per-record
`schemaless_reader` (what `eos.from_confluent_avro` and `value_deserializer` call)? The bodies of records
with one writer schema, concatenated, are a valid block of an Avro container file: fastavro's `reader`
decodes the block in a loop of its own. No broker, no Spark.

    .venv/bin/python -m bench.probes.avro_block_read [--records 100000] [--rounds 3]

Prints, per round, the records/s of each way and their ratio (the same values are checked equal).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import time

import fastavro

SCHEMA = {
    "type": "record",
    "name": "Trade",
    "namespace": "shop",
    "fields": [
        {"name": "sym", "type": "string"},
        {"name": "qty", "type": "long"},
        {"name": "px", "type": "double"},
        {"name": "venue", "type": "string"},
    ],
}


def _long(n: int) -> bytes:
    """Avro's zig-zag varint."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _container(bodies: list[bytes]) -> io.BytesIO:
    """One Avro container file holding `bodies` as its one block."""
    sync = os.urandom(16)
    out = io.BytesIO()
    out.write(b"Obj\x01")
    meta = {"avro.schema": json.dumps(SCHEMA).encode(), "avro.codec": b"null"}
    out.write(_long(len(meta)))
    for key, value in meta.items():
        out.write(_long(len(key)) + key.encode() + _long(len(value)) + value)
    out.write(b"\x00" + sync)
    data = b"".join(bodies)
    out.write(_long(len(bodies)) + _long(len(data)) + data + sync)
    out.seek(0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    schema = fastavro.parse_schema(SCHEMA)
    bodies = []
    for i in range(args.records):
        body = io.BytesIO()
        fastavro.schemaless_writer(body, schema, {"sym": f"S{i}", "qty": i, "px": i * 0.5, "venue": "XNAS"})
        bodies.append(body.getvalue())
    for round_ in range(1, args.rounds + 1):
        started = time.perf_counter()
        one = [fastavro.schemaless_reader(io.BytesIO(b), schema, None) for b in bodies]
        per_record = time.perf_counter() - started
        started = time.perf_counter()
        block = list(fastavro.reader(_container(bodies)))
        as_block = time.perf_counter() - started
        assert one == block
        print(
            f"round {round_}: per record {args.records / per_record:,.0f} rec/s, one block"
            f" {args.records / as_block:,.0f} rec/s, block/per-record {per_record / as_block:.2f}"
        )


if __name__ == "__main__":
    main()
