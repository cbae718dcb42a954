"""D3 on a cluster: which executor runs each input partition's task. Its state stores and its producer are
on the executor that ran it last; a task that runs elsewhere restores its stores there (from a snapshot or
the whole changelog) and starts a producer. Spark's Kafka source prefers an executor per topic-partition,
hashed over the executors alive, so any change of executors moves partitions off executors that are still
alive; and a Python sink can say nothing about where a task runs.

On a classic session with two or more executors, eos keeps each input partition on the executor that ran
it last while that executor is alive, gives the partitions of a lost executor (and new ones) to the
executors with the fewest per task slot, and moves as few as it takes to keep them balanced by slots (an
executor that joins takes its share). The batch's Spark partitions are grouped into tasks per executor
(no more tasks per executor than its task slots: one wave) by a coalescer whose
groups carry the chosen executor as their preferred location (`eos/_spark/jvm/Placement.java`, shipped
in the wheel and added to the session with `addJar`). Spark still runs a task elsewhere when its executor
stays busy past `spark.locality.wait`; the task reports where it ran, and that is what eos remembers.

Spark Connect sessions (no JVM on the client's side), local mode and a missing jar keep Spark's own
placement, as does `task_affinity=False`.
"""

from __future__ import annotations

import functools
import importlib.resources
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

TopicPartition = tuple[str, int]

#: The task-local property `eos.spark.Placement.Where` sets: the executor a task runs on, as Spark names a
#: task location (`executor_<host>_<id>`).
PROPERTY = "eos.executor"
#: ... and the executor eos placed it on
PLACED = "eos.executor.placed"
_JAR = "eos-placement.jar"
_CLASS = "eos.spark.Placement"


def executor_of_task(context: Any) -> tuple[str | None, bool]:
    """On an executor, from the task's `pyspark.TaskContext`: the location of the executor this task
    runs on (where eos placed the task, else None), and whether it is the executor eos placed it on
    (Spark runs a task elsewhere when its executor stays busy past `spark.locality.wait`)."""
    if context is None:
        return None, False
    executor = context.getLocalProperty(PROPERTY)
    return executor, executor is not None and executor == context.getLocalProperty(PLACED)


def assign(
    partitions: Iterable[TopicPartition],
    last: Mapping[TopicPartition, str],
    alive: Mapping[str, int],
    arrived: Mapping[TopicPartition, int] | None = None,
) -> dict[TopicPartition, str]:
    """Each input partition's executor among `alive` (executor -> its task slots): the one that ran it
    `last` while it is alive; the others (new, or their executor lost) to the executors with the fewest
    per slot; then, while moving one partition from the executor with the most per slot to the one with
    the fewest leaves the second with fewer per slot than the first had, the one that `arrived` there
    last moves (a lost executor's partitions that Spark retried in one task on one executor move on,
    not the partitions that executor always held). Balanced by slots, moving as few partitions as that
    takes; deterministic."""
    order = sorted(set(partitions))
    slots = {e: max(1, n) for e, n in sorted(alive.items())}
    if not slots:
        return {}
    arrived = arrived or {}
    chosen = {tp: last[tp] for tp in order if last.get(tp) in slots}
    load = Counter({e: 0 for e in slots})
    load.update(chosen.values())
    for tp in order:
        if tp not in chosen:
            chosen[tp] = min(slots, key=lambda e: ((load[e] + 1) / slots[e], e))
            load[chosen[tp]] += 1
    for _ in range(len(order)):  # each move lowers the most loaded; never more moves than partitions
        most = max(slots, key=lambda e: (load[e] / slots[e], e))
        fewest = min(slots, key=lambda e: ((load[e] + 1) / slots[e], e))
        if most == fewest or load[most] / slots[most] <= (load[fewest] + 1) / slots[fewest]:
            break
        tp = max((tp for tp, e in chosen.items() if e == most), key=lambda tp: (arrived.get(tp, -1), tp))
        chosen[tp] = fewest
        load[most] -= 1
        load[fewest] += 1
    return chosen


def task_groups(executors: Sequence[str], slots: Mapping[str, int]) -> list[tuple[str, list[int]]]:
    """The tasks of a batch whose Spark partition i runs on `executors[i]`: per executor, its partitions
    in at most its `slots` tasks (as even as they divide, in partition order), each with its executor."""
    by_executor: dict[str, list[int]] = {}
    for index, executor in enumerate(executors):
        by_executor.setdefault(executor, []).append(index)
    groups = []
    for executor in sorted(by_executor):
        indices = by_executor[executor]
        n = min(len(indices), max(1, slots.get(executor, 1)))
        size, extra = divmod(len(indices), n)
        start = 0
        for g in range(n):
            end = start + size + (1 if g < extra else 0)
            groups.append((executor, indices[start:end]))
            start = end
    return groups


class Affinity:
    """The sink's memory of where each input partition last ran, and the placement of its next batch."""

    def __init__(self) -> None:
        self.last: dict[TopicPartition, str] = {}
        #: when each input partition came to its executor (a count of the batches written)
        self.arrived: dict[TopicPartition, int] = {}
        self._batches = 0
        self._off = False

    def ran(self, stats: Iterable[Mapping[str, Any]]) -> None:
        """Remembers the executor each stats row's input partition ran on (reported by its task)."""
        self._batches += 1
        for row in stats:
            tp, executor = (row["topic"], row["partition"]), row.get("executor")
            if executor and self.last.get(tp) != executor:
                self.last[tp] = executor
                self.arrived[tp] = self._batches

    def plan(self, session: Any, partitions: Sequence[TopicPartition], log: Any) -> AffinityPlan | None:
        """Where the tasks of a batch whose Spark partition i reads input partition `partitions[i]` run;
        None where eos cannot place them (Spark's placement stands). Placement only saves restores: a
        session where the classes cannot be loaded or driven keeps Spark's placement, said once."""
        if not partitions or self._off or _local(session):
            return None
        try:
            jvm = _Jvm.of(session)
            if jvm is None:
                if _Jvm.classic(session) and session.sparkContext._jsc.sc().getExecutorIds().size() > 1:
                    self._turn_off(log, f"eos's {_JAR} is not beside its package (a build without it)")
                return None
            alive = jvm.executors()
            if len(alive) < 2:
                return None
            # Balanced over every input partition the query has run, not only this batch's (a batch
            # that reads a few partitions would otherwise move some to even out its own tasks).
            chosen = assign({*partitions, *self.last}, self.last, alive, self.arrived)
            groups = task_groups([chosen[tp] for tp in partitions], alive)
            return AffinityPlan(jvm, groups, len(partitions))
        except Exception as exc:  # noqa: BLE001 - any failure of the JVM side leaves Spark's placement
            self._turn_off(log, f"placing the tasks failed: {_reason(exc)}")
            return None

    def may_place(self, session: Any) -> bool:
        """Whether `plan` may place the tasks of a batch in `session` (a classic session off Spark's
        local mode, placement not turned off): its input partitions are then needed before it runs."""
        return not self._off and _Jvm.classic(session) and not _local(session)

    def apply(self, plan: AffinityPlan, df: Any, log: Any) -> Any:
        """`df` in `plan`'s tasks; `df` itself (Spark's placement) where the JVM side fails."""
        try:
            return plan.apply(df)
        except Exception as exc:  # noqa: BLE001 - as in plan
            self._turn_off(log, f"placing the tasks failed: {_reason(exc)}")
            return df

    def _turn_off(self, log: Any, why: str) -> None:
        self._off = True
        log.warning("task affinity off", detail=f"{why}: Spark's placement of the tasks stands")


class AffinityPlan:
    """A batch's tasks: the Spark partitions of each and the executor it prefers."""

    def __init__(self, jvm: _Jvm, groups: list[tuple[str, list[int]]], partitions: int) -> None:
        self.jvm = jvm
        self.groups = groups
        self.partitions = partitions

    def apply(self, df: Any) -> Any:
        """`df` (the batch's `partitions` Spark partitions as the source read them) in these tasks."""
        return self.jvm.placed(df, self.groups, self.partitions)


class _Jvm:
    """The placement classes in a classic session's JVM: loaded once per SparkContext (the driver loads
    them from the jar; `addJar` ships it to the executors, which deserialize the coalescer and `Where`)."""

    #: by SparkContext (its Python object: its applicationId costs a JVM round trip at every batch)
    _loaded: dict[Any, _Jvm | None] = {}

    def __init__(self, sc: Any, loader: Any) -> None:
        self.sc = sc
        self.loader = loader
        self._shared: dict[str, Any] = {}

    @classmethod
    def apart(cls, sc: Any) -> bool:
        """Whether eos's classes are already loaded in `sc`'s JVM by a class loader of their own (a
        JVM-path query ran before eos.register), which the jar on the driver's class loader would split."""
        loaded = cls._loaded.get(sc)
        if loaded is None:
            return False
        return not loaded.loader.equals(sc._jvm.java.lang.Thread.currentThread().getContextClassLoader())

    @staticmethod
    def classic(session: Any) -> bool:
        """Whether `session` has a JVM on this side (a Spark Connect session has none)."""
        return getattr(session, "_jsparkSession", None) is not None

    @classmethod
    def of(cls, session: Any) -> _Jvm | None:
        if not cls.classic(session):
            return None
        sc = session.sparkContext
        key = sc
        if key not in cls._loaded:
            jar = _jar_path()
            if jar is None:
                cls._loaded[key] = None
            else:
                gateway = sc._gateway
                parent = sc._jvm.java.lang.Thread.currentThread().getContextClassLoader()
                if _loads(parent, _CLASS):  # eos.register put the jar there: one copy of eos's classes
                    loader = parent
                else:
                    urls = gateway.new_array(sc._jvm.java.net.URL, 1)
                    urls[0] = sc._jvm.java.io.File(str(jar)).toURI().toURL()
                    loader = sc._jvm.java.net.URLClassLoader(urls, parent)
                sc._jsc.sc().addJar(str(jar))
                cls._loaded[key] = cls(sc, loader)
        return cls._loaded[key]

    def executors(self) -> dict[str, int]:
        """The executors alive now, as task locations (the driver's block manager's peers, as Spark's
        Kafka source lists them), each with its task slots (its cores over `spark.task.cpus`)."""
        sc = self.sc._jsc.sc()
        manager = self.sc._jvm.org.apache.spark.SparkEnv.get().blockManager()
        peers = manager.master().getPeers(manager.blockManagerId())
        ids = [peers.apply(i) for i in range(peers.size())]
        if len(ids) < 2:  # local mode, or one executor: nothing to place (and nothing more to ask)
            return {f"executor_{b.host()}_{b.executorId()}": 1 for b in ids}
        summaries = sc.statusStore().executorList(True)
        cores = {}
        for i in range(summaries.size()):
            summary = summaries.apply(i)
            cores[summary.id()] = summary.totalCores()
        per_task = max(1, int(sc.conf().get("spark.task.cpus", "1")))
        default = max(1, self.sc.defaultParallelism // max(1, len(ids)))
        return {
            f"executor_{b.host()}_{b.executorId()}": max(1, cores.get(b.executorId(), default) // per_task)
            for b in ids
        }

    def placed(self, df: Any, groups: Sequence[tuple[str, Sequence[int]]], partitions: int) -> Any:
        from pyspark.sql import DataFrame

        gateway, jvm = self.sc._gateway, self.sc._jvm
        indices = gateway.new_array(jvm.int, len(groups), 0)
        locations = gateway.new_array(jvm.String, len(groups))
        for g, (executor, members) in enumerate(groups):
            row = gateway.new_array(jvm.int, len(members))
            for j, index in enumerate(members):
                row[j] = index
            indices[g] = row
            locations[g] = executor
        scala = jvm.scala.util.Properties.versionNumberString()
        coalescer = self._new(
            f"{_CLASS}$Scala212" if scala.startswith("2.12.") else _CLASS, indices, locations
        )
        rows = df._jdf.queryExecution().toRdd()
        if rows.getNumPartitions() != partitions:  # the lineage named other partitions than the plan has
            raise RuntimeError(f"{rows.getNumPartitions()} Spark partitions, the lineage names {partitions}")
        grouped = rows.coalesce(len(groups), False, jvm.scala.Option.apply(coalescer), None)
        grouped.getNumPartitions()  # the coalescer's check of the groups, here rather than in the job
        tagged = grouped.toJavaRDD().mapPartitions(self._new(f"{_CLASS}$Where", locations), True).rdd()
        session = df.sparkSession  # the query's own (foreachBatch gives each query a session of its own)
        placed = session._jsparkSession.internalCreateDataFrame(tagged, df._jdf.schema(), False)
        return DataFrame(placed, session)

    def shared(self, name: str) -> Any:
        """The one instance of class `name` (a no-argument constructor) in this SparkContext's JVM."""
        if name not in self._shared:
            self._shared[name] = self._new(name)
        return self._shared[name]

    def _new(self, name: str, *args: Any) -> Any:
        gateway = self.sc._gateway
        arguments = gateway.new_array(self.sc._jvm.Object, len(args))
        for i, arg in enumerate(args):
            arguments[i] = arg
        return self.loader.loadClass(name).getConstructors()[0].newInstance(arguments)


def _loads(loader: Any, name: str) -> bool:
    """Whether class `name` loads through `loader` (a JVM class loader, over Py4J)."""
    try:
        loader.loadClass(name)
    except Exception:  # noqa: BLE001 - Py4J's wrapper of ClassNotFoundException
        return False
    return True


def _local(session: Any) -> bool:
    """Whether `session` runs in Spark's local mode (one executor: nothing to place), from its master
    setting as the Python side holds it (no JVM round trip at every batch)."""
    context = getattr(session, "_sc", None)
    master = getattr(context, "master", None) or ""
    return master == "local" or master.startswith("local[")


def _reason(exc: Exception) -> str:
    """A failure in one line: a JVM exception's own (class and message), not Py4J's wrapper."""
    java = getattr(exc, "java_exception", None)
    return str(java.toString() if java is not None else repr(exc))[:500]


@functools.cache
def _jar_path() -> Path | None:
    """The placement jar as a file (extracted once where eos is imported from a zip); None without it."""
    resource = importlib.resources.files("eos._spark") / "jvm" / _JAR
    if not resource.is_file():
        return None
    if isinstance(resource, Path):
        return resource
    target = Path(tempfile.mkdtemp(prefix="eos-jar-")) / _JAR
    with resource.open("rb") as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return target
