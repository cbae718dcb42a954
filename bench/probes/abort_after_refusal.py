"""Whether an abort right after a refused record fails the producer (librdkafka issue 4849: an
EndTxn(abort) sent while the transaction's partitions are still being added to it is answered
INVALID_TXN_STATE, a fatal error), with and without the flush `OutputProducer.abort_transaction` does
before it. The sequence of tests/integration/test_dead_letters.py
(`test_an_abort_right_after_a_refused_record_leaves_the_producer_usable`), per try: a fresh producer
for the same transactional.id commits 100 records with offsets, begins again, produces 4 records, has
one of 1 MiB + 10 bytes refused by produce() (too large), and aborts at once.

    .venv/bin/python -m bench.probes.abort_after_refusal [--bootstrap 127.0.0.1:9092] [--runs 2]
        [--tries 20]

`flush`: eos's `abort_transaction()`. `no-flush`: librdkafka's abort_transaction() called directly. The
modes alternate run by run. An abort failed when it raised, or when the producer's error_cb received a
fatal error by 100 ms after it. Prints, per mode and run, how many of `--tries` aborts failed, and the
errors.
"""

from __future__ import annotations

import argparse
import uuid
from collections import Counter

from confluent_kafka import KafkaException

import eos
from eos import testing
from eos._kafka import _offsets, _pool, _producer

MODES = ("no-flush", "flush")


def one_try(config: eos.Config, tid: str, source: str, attempt: int, flush: bool) -> str | None:
    """None when the abort succeeded, else its error."""
    producer = _producer.OutputProducer(config, tid)  # fresh, as a new task's
    output = config.output_topic
    try:
        producer.init_transactions()
        for i in range(100):
            producer.records.produce(eos.Output(b"%d" % i), output, source, 0, i)
        producer.send_offsets([(source, 0, 100 * (attempt + 1))], _offsets.group_metadata(config))
        producer.commit_transaction()
        for i in range(4):
            producer.records.produce(eos.Output(b"x"), output, source, 0, 100 + i)
        try:
            producer.records.produce(eos.Output(b"z" * (2**20 + 10)), output, source, 0, 104)
        except eos.ProduceError:
            pass
        else:
            return "the large record was not refused"
        try:
            if flush:
                producer.abort_transaction()
            else:
                producer._producer.abort_transaction(30)
        except (eos.EosError, KafkaException) as exc:
            return f"{type(exc).__name__}: {exc}"[:160]
        producer._producer.poll(0.1)  # a fatal error the abort did not raise reaches error_cb
        if producer.fatal_error is not None:
            return f"fatal after the abort: {producer.fatal_error.str()}"[:160]
        return None
    finally:
        _pool.discard(producer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--runs", type=int, default=2, help="runs per mode")
    parser.add_argument("--tries", type=int, default=20, help="tries per run")
    args = parser.parse_args()
    app = f"probe-abort-{uuid.uuid4().hex[:6]}"
    source, output = f"{app}-in", f"{app}-out"
    for topic in (source, output):
        testing.create_topic(args.bootstrap, topic, 1)
    config = eos.Config(
        bootstrap_servers=args.bootstrap, app_id=app, output_topic=output, processing_guarantee="exactly_once"
    )
    attempt = 0
    for run in range(args.runs):
        for mode in MODES:
            errors: Counter[str] = Counter()
            for _ in range(args.tries):
                error = one_try(config, f"{app}-tid", source, attempt, flush=mode == "flush")
                attempt += 1
                if error is not None:
                    errors[error] += 1
            print(f"run {run + 1} {mode:<8}: {sum(errors.values())} of {args.tries} aborts failed")
            for error, count in errors.most_common():
                print(f"    {count} x {error}")


if __name__ == "__main__":
    main()
