"""The fault schedule: what each driver incarnation arms and what is done to it from outside.

Every fault is real: SIGKILL of a driver's process group, of a Python worker or of an executor JVM;
SIGKILL from inside at a named crash point (`EOS_CRASH_AT`); a broker stopped and started again (or
SIGKILLed); SIGSTOP/SIGCONT of a Python worker (a zombie that speculation takes over) or of every
executor for longer than `transaction.timeout.ms`. The schedule is a pure function of a seed, so the
exactly_once and at_least_once runs undergo the same one.
"""

from __future__ import annotations

import random

import attrs

from eos._crash import POINTS

#: faults injected from outside while an incarnation runs, rotated over the incarnations, two at a time;
#: a pause comes first in its pair, so it acts within a second of the task stopping itself
EXTERNAL = (
    "python_worker_kill",  # F10: Spark retries the task on a fresh worker
    "broker_restart",  # F7
    "zombie_pause",  # F8 + F10: SIGSTOP a Python worker; a speculative attempt takes over
    "executor_kill",  # F10: the executor JVM is lost, its tasks (and shuffle output) are redone
    "executor_pause",  # F9: every executor stopped for longer than transaction.timeout.ms
    "broker_restart",
    "python_worker_kill",
    "broker_restart",
)


#: the same rotation on a replicated cluster (`--brokers 3`): a broker restart becomes one of the faults
#: a cluster has, each done for real with SIGKILL or SIGTERM of broker JVMs (see runner.Chaos.inject)
CLUSTER_EXTERNAL = (
    "python_worker_kill",
    "coordinator_kill",  # the leader of the app's transaction coordinator partition, while tasks write
    "zombie_pause",
    "leader_kill",  # the leader of an output (or changelog) partition
    "executor_kill",
    "two_down",  # two of three brokers at once: below min.insync.replicas, writes wait or abort
    "executor_pause",
    "coordinator_kill",
    "python_worker_kill",
    "rolling_restart",  # each broker in turn, waiting for full ISRs in between
    "executor_kill",
    "leader_kill",
)
BROKER_FAULTS = frozenset(
    {"broker_restart", "coordinator_kill", "leader_kill", "two_down", "rolling_restart"}
)


@attrs.frozen
class Incarnation:
    crash_points: tuple[str, ...]
    external: tuple[str, ...]
    #: how the incarnation ends: "driver_kill" (SIGKILL at a random moment), "rerun_batch" (F5: the driver
    #: SIGKILLs itself after the sink finished a batch, before Spark's commit log), or "finish"
    end: str
    #: seconds to wait after the progress point before each external fault and before the driver kill
    delays: tuple[float, ...]


def schedule(
    seed: int, incarnations: int, externals_per_incarnation: int = 2, cluster: bool = False
) -> list[Incarnation]:
    """`incarnations` faulty driver runs, then one that runs to the end of the input unharmed."""
    rotation = CLUSTER_EXTERNAL if cluster else EXTERNAL
    rng = random.Random(seed)
    plan = []
    ext = 0
    for i in range(incarnations):
        points = [POINTS[i % len(POINTS)]]
        if i >= len(POINTS):
            points.append(POINTS[(i + 2) % len(POINTS)])
        external = []
        for _ in range(externals_per_incarnation):
            external.append(rotation[ext % len(rotation)])
            ext += 1
        end = "rerun_batch" if i % 3 == 2 else "driver_kill"
        delays = tuple(round(rng.uniform(0.2, 3.0), 2) for _ in range(len(external) + 1))
        plan.append(Incarnation(tuple(points), tuple(external), end, delays))
    plan.append(Incarnation((), (), "finish", ()))
    return plan
