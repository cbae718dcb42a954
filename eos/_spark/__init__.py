"""The Spark side: the driver's checks and decisions per micro-batch, what the batch's lineage says it
read, and the `format("eos")` and `foreach_writer` entry points. It hands each task to `eos._core`.
"""
