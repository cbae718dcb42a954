"""The command line every example shares when run as a script: where the broker is, the topics, the app
id and checkpoint, and a few sample records to read. Not part of what an example shows: its `main()` is."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable

from eos import testing

PARTITIONS = 4


def parse(
    doc: str, name: str, output: str, input_topic: str = "example-orders", more: Callable | None = None
) -> argparse.Namespace:
    """The example's arguments: --bootstrap, --input, --output, --app-id, --checkpoint, --sample and
    whatever `more(parser)` adds."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--input", default=input_topic)
    parser.add_argument("--output", default=output)
    parser.add_argument("--app-id", default=f"example-{name}")
    parser.add_argument("--checkpoint", default=f"/tmp/eos-examples/{name}")
    parser.add_argument("--sample", type=int, default=10, help="sample records per partition (0: none)")
    if more is not None:
        more(parser)
    return parser.parse_args()


def seed(args: argparse.Namespace, more_topics: Iterable[tuple[str, int]] = ()) -> None:
    """With --sample: the input and output topics (and `more_topics`) created, sample records written."""
    if not args.sample:
        return
    for topic, partitions in ((args.input, PARTITIONS), (args.output, PARTITIONS), *more_topics):
        testing.create_topic(args.bootstrap, topic, partitions)
    testing.produce_sequence(args.bootstrap, args.input, PARTITIONS, args.sample)
