"""What becomes of the first record written after an abort that followed a refused record batch: the
step `PartitionTask._isolate` repeats for each suspect. The output topic takes records of at most
1,000 bytes (max.message.bytes); per try, a fresh producer writes 40 records record by record
(`records.exact`, as a redo does), the 26th of 2,000 bytes, so that the broker refuses the whole batch
it travels in; eos's `abort_transaction()`; then a new transaction with one small record, flushed and
checked, then a second one the same way. `--fresh`: the two writes go through a fresh producer of the
same transactional id (`PartitionTask._drop`'s way), whose init_transactions is timed.

    .venv/bin/python -m bench.probes.purge_after_abort [--bootstrap 127.0.0.1:9092] [--tries 10] [--fresh]

Prints, per try, what the refused batch raised and what each of the two writes after the abort did
(`ok`, or the error: librdkafka's _PURGE_QUEUE shows as "Purged in queue"), then the counts.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections import Counter

import eos
from eos import testing
from eos._kafka import _pool, _producer


def write_one(producer: _producer.OutputProducer, output: str, source: str, offset: int) -> str:
    """One small record in a transaction of its own, flushed and checked, then aborted (as `_isolate`)."""
    try:
        producer.records.produce(eos.Output(b"small"), output, source, 0, offset)
        producer.records.flush_and_check(source, 0)
        return "ok"
    except eos.EosError as exc:
        return f"{type(exc).__name__}: {str(exc)[:100]}"
    finally:
        producer.abort_transaction()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--tries", type=int, default=10)
    parser.add_argument("--fresh", action="store_true", help="write after the abort with a fresh producer")
    args = parser.parse_args()
    app = f"probe-purge-{uuid.uuid4().hex[:6]}"
    source, output = f"{app}-in", f"{app}-out"
    testing.create_topic(args.bootstrap, output, 1, config={"max.message.bytes": "1000"})
    config = eos.Config(
        bootstrap_servers=args.bootstrap, app_id=app, output_topic=output, processing_guarantee="exactly_once"
    )
    outcomes: Counter[tuple[str, str]] = Counter()
    inits: list[float] = []
    for n in range(args.tries):
        producer = _producer.OutputProducer(config, f"{app}-tid")  # fresh, as a new task's
        try:
            producer.init_transactions()
            producer.records.exact = True
            for i in range(40):
                producer.records.produce(eos.Output(b"x" * (2_000 if i == 25 else 50)), output, source, 0, i)
            try:
                producer.records.flush_and_check(source, 0)
                refused = "nothing refused"
            except eos.EosError as exc:
                candidates = getattr(exc, "candidates", ())
                refused = f"{type(exc).__name__} naming {len(candidates)} input records"
            producer.abort_transaction()
            if args.fresh:
                _pool.discard(producer)
                producer = _producer.OutputProducer(config, f"{app}-tid")
                started = time.monotonic()
                producer.init_transactions(known_topic=output)
                inits.append(time.monotonic() - started)
            first = write_one(producer, output, source, 100)
            second = write_one(producer, output, source, 101)
        finally:
            _pool.discard(producer)
        outcomes[("first", first)] += 1
        outcomes[("second", second)] += 1
        print(f"try {n + 1}: {refused}; first write after the abort: {first}; second: {second}")
    for (which, outcome), count in sorted(outcomes.items()):
        print(f"{which} write after the abort: {count} of {args.tries} {outcome}")
    if inits:
        print(f"the fresh producer's init_transactions: median {statistics.median(inits) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
