"""How long a fresh producer takes to fence the one before it: `init_transactions` for a transactional.id
that another producer, still alive, initialised last (a displaced kept producer replaced, a part's
producer in a new task). Per setting: how many metadata requests for a topic that exists come before it
(eos makes two: `OutputProducer.init_transactions(known_topic=...)`), and librdkafka's
reconnect.backoff.ms (eos sets 10 ms, `_clients.producer_settings`; librdkafka's default is 100).

    .venv/bin/python -m bench.probes.init_transactions [--bootstrap 127.0.0.1:9092] [--rounds 8]
        [--warmups 0,1,2] [--backoff-ms 10,100]

Prints, per setting, the milliseconds of init_transactions itself and of the metadata requests before
it, each round, then the medians and the count of inits at or above 400 ms (librdkafka's coordinator query
waits 500 ms when it starts before the producer has a connection to use). The settings are interleaved
within each round, each on its own transactional.id.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

from eos import testing
from eos._kafka import _pool, _producer
from eos.config import Config

SLOW_MS = 400


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--warmups", default="0,1,2", help="metadata requests before init (comma list)")
    parser.add_argument("--backoff-ms", default="10,100", help="reconnect.backoff.ms values (comma list)")
    args = parser.parse_args()
    app = f"probe-init-{uuid.uuid4().hex[:6]}"
    topic = f"{app}-in"
    testing.create_topic(args.bootstrap, topic, 1)
    settings = [
        (int(w), int(b)) for b in args.backoff_ms.split(",") for w in args.warmups.split(",") if w and b
    ]
    configs = {
        s: Config(
            bootstrap_servers=args.bootstrap,
            app_id=app,
            output_topic=topic,
            processing_guarantee="exactly_once",
            producer={"reconnect.backoff.ms": s[1]},
        )
        for s in settings
    }
    holders: dict[tuple[int, int], _producer.OutputProducer] = {}
    for (warmups, backoff), config in configs.items():  # the producer each first timed init fences
        holders[(warmups, backoff)] = first = _producer.OutputProducer(config, f"{app}-{warmups}-{backoff}")
        first.init_transactions(known_topic=topic)
    timings: dict[tuple[int, int], list[tuple[float, float]]] = {s: [] for s in settings}
    for _ in range(args.rounds):
        for (warmups, backoff), config in configs.items():
            time.sleep(0.2)
            fresh = _producer.OutputProducer(config, f"{app}-{warmups}-{backoff}")
            t0 = time.perf_counter()
            for _ in range(warmups):  # what init_transactions(known_topic=...) does first
                fresh._producer.list_topics(topic, timeout=30)
            t1 = time.perf_counter()
            fresh.init_transactions()
            t2 = time.perf_counter()
            _pool.discard(holders.pop((warmups, backoff)))  # fenced: closing may raise
            holders[(warmups, backoff)] = fresh
            timings[(warmups, backoff)].append(((t1 - t0) * 1000, (t2 - t1) * 1000))
    for producer in holders.values():
        _pool.discard(producer)
    print(f"{'metadata requests':>17} {'backoff ms':>10}  init ms per round (metadata ms)")
    for (warmups, backoff), rows in timings.items():
        inits = [init for _, init in rows]
        each = "  ".join(f"{init:.0f} ({meta:.0f})" for meta, init in rows)
        slow = sum(init >= SLOW_MS for init in inits)
        total = statistics.median(meta + init for meta, init in rows)
        print(
            f"{warmups:>17} {backoff:>10}  {each}\n{'':>29}init median {statistics.median(inits):.0f} ms,"
            f" {slow} of {len(inits)} at or above {SLOW_MS} ms; metadata + init median {total:.0f} ms"
        )


if __name__ == "__main__":
    main()
