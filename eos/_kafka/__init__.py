"""The Kafka client layer: with `eos._registry` (Schema Registry), the only code that imports
confluent_kafka or reads its error codes.

Everything above it (the per-partition core, the Spark entry points, the CLI) calls these modules and
sees only `eos.errors` types; `_translate.py` is where confluent-kafka's errors become them. (The public
`eos.testing` sees confluent-kafka's own exceptions, as it always has.)
"""
