"""Schema Registry: the serializers of outputs (`_serializers`) and the decoders of input (`_decoders`),
the only code importing confluent_kafka.schema_registry."""
