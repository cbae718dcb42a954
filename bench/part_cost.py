"""What one part's transaction costs, step by step, on a running broker (`make broker-up`):

    .venv/bin/python -m bench.part_cost [--bootstrap 127.0.0.1:9092] [--rounds 6] [--records 2500]

Per round, a fresh producer for one part: create, init_transactions, the progress OffsetFetch, produce
and flush `--records` small records, send_offsets_to_transaction, commit, close (ms). docs/design.md
("Kept producers") quotes it.
"""

from __future__ import annotations

import argparse
import time
import uuid

from eos import _names, testing
from eos._kafka import _offsets, _pool, _producer, _topics
from eos.config import Config


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--records", type=int, default=2_500)
    args = parser.parse_args()
    app = f"part-cost-{uuid.uuid4().hex[:6]}"
    config = Config(
        bootstrap_servers=args.bootstrap,
        app_id=app,
        output_topic=f"{app}-out",
        processing_guarantee="exactly_once",
        input_mode="any",
    )
    testing.create_topic(args.bootstrap, config.output_topic, 4)
    _topics.ensure_parts_topic(config)
    topic = _names.parts_topic(app)
    print("create  init  fetch  produce+flush  send_offsets  commit  close   (ms)")
    for n in range(args.rounds):
        time.sleep(0.5)
        marks = [time.perf_counter()]
        producer = _producer.OutputProducer(config, _names.part_transactional_id(app, 0))
        marks.append(time.perf_counter())
        producer.init_transactions(known_topic=topic)
        marks.append(time.perf_counter())
        _offsets.committed_entries(config, [(topic, 0)])
        marks.append(time.perf_counter())
        producer._maybe_begin()  # the records below go to librdkafka directly, past the lazy begin
        for i in range(args.records):
            producer._producer.produce(config.output_topic, b"v" * 20, b"k%d" % i)
        producer.records.flush_and_check(topic, 0)
        marks.append(time.perf_counter())
        offsets = [(topic, 0, n + 1, _offsets.stamp(config))]
        producer.send_offsets(offsets, _offsets.group_metadata(config))
        marks.append(time.perf_counter())
        producer.commit_transaction()
        marks.append(time.perf_counter())
        _pool.discard(producer)
        marks.append(time.perf_counter())
        print("  ".join(f"{(b - a) * 1000:6.1f}" for a, b in zip(marks, marks[1:], strict=False)))


if __name__ == "__main__":
    main()
