"""What a delivery callback costs eos's produce() loop (`RecordCollector.produce_outputs`, Arrow hand-off
off: `arrow_produce=False`), in one transactional producer, per mode:

- `tracked`: the loop of a redo (`records.exact`): a `partial` naming each record's input offset, per
  record, through `_send`;
- `shared`: the plain loop with one shared callback for every record (what at_least_once passes);
- `none`: the plain loop with no callback (what exactly_once passes: a failed delivery fails the commit).

`shared` is made by handing the transactional producer the callback at_least_once uses, so the three
differ in the callback and nothing else.

    .venv/bin/python -m bench.probes.delivery_callback [--bootstrap 127.0.0.1:9092] [--records 200000]
        [--rounds 5]

Each round writes `--records` values of 100 bytes with keys in one transaction per mode, the modes
interleaved. Prints per mode the produce loop's wall and process CPU time per record (CPU: all threads,
librdkafka's included), each also over `none`'s, and the whole transaction's records/s (loop, flush,
commit), medians over rounds. On a busy machine the CPU times are the steadier figure.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

from eos import testing
from eos._kafka import _producer
from eos.config import Config
from eos.records import Outputs

MODES = ("tracked", "shared", "none")


def one_transaction(producer: _producer.OutputProducer, outputs: Outputs, source: str) -> dict[str, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    producer.records.produce_outputs(outputs, source, 0)
    loop_wall, loop_cpu = time.perf_counter() - wall, time.process_time() - cpu
    producer.records.flush_and_check(source, 0)
    producer.commit_transaction()
    n = len(outputs)
    return {
        "loop_us": loop_wall / n * 1e6,
        "loop_cpu_us": loop_cpu / n * 1e6,
        "records_s": n / (time.perf_counter() - wall),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    app = f"probe-callback-{uuid.uuid4().hex[:6]}"
    source, output = f"{app}-in", f"{app}-out"
    testing.create_topic(args.bootstrap, output, 4)
    config = Config(
        bootstrap_servers=args.bootstrap,
        app_id=app,
        output_topic=output,
        processing_guarantee="exactly_once",
        arrow_produce=False,
    )
    n = args.records
    outputs = Outputs(
        values=[b"v" * 100] * n,
        topic=output,
        keys=[b"k%d" % (i % 10_000) for i in range(n)],
        first=0,
        last=n - 1,
    )
    producers = {}
    for mode in MODES:
        producer = _producer.OutputProducer(config, f"{app}-{mode}")
        producer.init_transactions()
        if mode == "tracked":
            producer.records.exact = True
        elif mode == "shared":
            producer.records._fast_callback = producer.records._on_report
        one_transaction(producer, outputs, source)  # warm: connections, topic checks
        producers[mode] = producer
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for _ in range(args.rounds):
        for mode, producer in producers.items():
            results[mode].append(one_transaction(producer, outputs, source))
    for producer in producers.values():
        producer.close()

    def median(mode: str, what: str) -> float:
        return statistics.median(r[what] for r in results[mode])

    print(f"{n:,} records per transaction, {args.rounds} rounds, medians; ratios to 'none'")
    print("mode     loop us/record (ratio)  loop CPU us/record (ratio)  records/s with commit")
    for mode in MODES:
        loop, cpu = median(mode, "loop_us"), median(mode, "loop_cpu_us")
        print(
            f"{mode:<8} {loop:>14.2f} ({loop / median('none', 'loop_us'):.2f})"
            f" {cpu:>18.2f} ({cpu / median('none', 'loop_cpu_us'):.2f}) {median(mode, 'records_s'):>22,.0f}"
        )


if __name__ == "__main__":
    main()
