"""A Spark Declarative Pipeline's definitions (tests/integration/test_pipelines.py runs them with Spark's
`spark-pipelines`): a Kafka topic copied to another through eos's sink, `dp.create_sink(format="eos")`.
The runner puts `spark` (its Spark Connect session) in this module. Settings come from EOS_SDP_*."""

import os

from pyspark import pipelines as dp

import eos

env = {
    name: os.environ[f"EOS_SDP_{name.upper()}"] for name in ("bootstrap", "app", "source", "output", "batch")
}
config = eos.Config(
    bootstrap_servers=env["bootstrap"],
    app_id=env["app"],
    output_topic=env["output"],
    processing_guarantee="exactly_once",
)
eos.register(spark)  # noqa: F821 - the runner's session; its conf.set calls are refused here, and logged
# at module level: a flow's function may not analyse a DataFrame, and read_stream reads its columns
source = eos.read_stream(spark, config, [env["source"]], maxOffsetsPerTrigger=int(env["batch"]))  # noqa: F821

dp.create_sink(
    "eos_out",
    format="eos",
    options={
        "kafka.bootstrap.servers": config.bootstrap_servers,
        "topic": config.output_topic,
        "eos.app.id": config.app_id,
        "eos.processing.guarantee": config.processing_guarantee,
    },
)


# The setting eos.register could not make (a definitions file may not set the session's conf), made
# for the flow: this flow is eos's pass-through sink, so format("eos") takes the JVM data path. (On the
# Python data source the run writes its batches, but the runner then fails on the Python workers'
# accumulator updates it receives: "[UNKNOWN_RESPONSE] Unknown response: Plan observed(...)".)
@dp.append_flow(target="eos_out", spark_conf={"spark.eos.format.functions": ""})
def to_kafka():
    return source
