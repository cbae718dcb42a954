"""eos's placement classes in a real Spark JVM (eos/_spark/jvm, loaded as the sink loads them): the tasks
are the groups asked for, each task's rows in partition order, and each task knows the executor it runs
on and whether that is the one eos placed it on. On a cluster: test_store_placement (make chaos)."""

from __future__ import annotations

import pytest

from eos._spark._affinity import Affinity, AffinityPlan, _Jvm


def test_tasks_run_the_groups_asked_for_and_know_where_they_were_placed(spark):
    jvm = _Jvm.of(spark)
    assert jvm is not None, "eos/_spark/jvm/eos-placement.jar missing: make setup builds it"
    here = jvm.sc._jvm.org.apache.spark.SparkEnv.get().blockManager().blockManagerId()
    local = f"executor_{here.host()}_{here.executorId()}"
    # (one executor in local mode; and local mode never revives offers, so a task placed on an executor
    # that is not there would wait for ever: eos places only on a cluster, on executors alive)
    groups = [(local, [0, 3]), (local, [2, 1]), (local, [4, 5])]
    df = spark.range(0, 60, 1, 6).selectExpr("id", "spark_partition_id() AS read_in")

    def report(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        from eos._spark._affinity import executor_of_task

        read_in = [p for b in batches for p in b.column(1).to_pylist()]
        executor, placed = executor_of_task(TaskContext.get())
        yield pa.RecordBatch.from_pylist(
            [
                {
                    "task": TaskContext.get().partitionId(),
                    "read_in": read_in,
                    "executor": executor,
                    "placed": placed,
                }
            ]
        )

    rows = (
        AffinityPlan(jvm, groups, 6)
        .apply(df)
        .mapInArrow(report, "task bigint, read_in array<bigint>, executor string, placed boolean")
    )
    tasks = {r.task: r for r in rows.collect()}
    assert sorted(tasks) == [0, 1, 2]
    for task, (_, members) in enumerate(groups):
        # each group's partitions, one after another, each whole (10 rows each)
        assert tasks[task].read_in == [p for p in members for _ in range(10)], tasks[task]
        assert tasks[task].executor == local
        assert tasks[task].placed


def test_groups_that_leave_a_partition_out_are_refused_and_spark_places_the_batch(spark):
    jvm = _Jvm.of(spark)
    here = jvm.sc._jvm.org.apache.spark.SparkEnv.get().blockManager().blockManagerId()
    local = f"executor_{here.host()}_{here.executorId()}"
    df = spark.range(0, 60, 1, 6).selectExpr("id", "spark_partition_id() AS read_in")
    partial = AffinityPlan(jvm, [(local, [0, 1, 2]), (local, [4, 5])], 6)  # partition 3 in no group
    with pytest.raises(Exception, match="5 of 6 partitions placed"):
        partial.apply(df)
    said = []

    class Log:
        def warning(self, event, **fields):
            said.append((event, fields["detail"]))

    affinity = Affinity()
    assert affinity.apply(partial, df, Log()) is df
    assert affinity.plan(spark, [("t", 0)], Log()) is None  # off for the query from then on
    assert [event for event, _ in said] == ["task affinity off"]
    assert "5 of 6 partitions placed" in said[0][1]
