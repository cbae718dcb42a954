"""The per-partition core: what a task does with the rows of one input partition (or one part), steps
0-8 and A1-A6 of docs/protocol.md. It imports neither pyspark nor confluent_kafka: Spark reaches it
through `eos._spark`, Kafka is reached through `eos._kafka._translate`.
"""
