"""The first offset reads against a broker that has just started: its group coordinator
(`__consumer_offsets`) is still being created and loaded, and answers NOT_COORDINATOR.

librdkafka's admin ListConsumerGroupOffsets handles that answer by dereferencing the admin client's
consumer group, which it does not have: the process dies of SIGSEGV (librdkafka issue 5040). With eos
asking through the admin client, a freshly started broker killed every process that read offsets
first (3 of 3 tries; as a spark-submit driver, 2 of 5 runs exited 139 with no Python traceback).
eos reads offsets through a consumer of the group, which waits for its coordinator.
"""

from __future__ import annotations

import subprocess
import sys

from eos.cli import EXIT_UNKNOWN_APP
from eos.session import free_port
from tests.support.localbroker import LocalBroker

# The child reads committed offsets of new groups, as a driver computing startingOffsets (unstable
# read) and a task before its first transaction (stable read) do.
READ_OFFSETS = """
import sys
import eos
from eos._kafka import _offsets

for i in range(10):
    config = eos.Config(bootstrap_servers=sys.argv[1], app_id=f"fresh-{i}", output_topic="out")
    unstable = _offsets.committed(config, [("in", 0), ("in", 1)], stable=False)
    stable = _offsets.committed(config, [("in", 0)])
    assert unstable == {("in", 0): None, ("in", 1): None}, unstable
    assert stable == {("in", 0): None}, stable
print("read", i + 1)
"""


def test_offsets_read_first_against_a_fresh_broker_do_not_crash(tmp_path):
    broker = LocalBroker(tmp_path / "kafka", port=free_port(), controller_port=free_port())
    broker.up()
    try:
        done = subprocess.run(
            [sys.executable, "-c", READ_OFFSETS, broker.bootstrap_servers],
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        broker.down()
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    assert done.stdout.strip().endswith("read 10"), done.stdout


def test_the_cli_first_against_a_fresh_broker_does_not_crash(tmp_path):
    """`eos offsets show` lists every partition of the group, which only the admin call can: the CLI
    lets the coordinator settle first (unknown app: exit 3, not a SIGSEGV)."""
    broker = LocalBroker(tmp_path / "kafka", port=free_port(), controller_port=free_port())
    broker.up()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "eos.cli", "--bootstrap-server", broker.bootstrap_servers]
            + ["offsets", "show", "--app", "fresh-cli"],
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        broker.down()
    assert done.returncode == EXIT_UNKNOWN_APP, f"exit {done.returncode}\n{done.stderr[-4000:]}"
