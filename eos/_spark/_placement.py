"""P1 of docs/protocol.md, on the driver: where each row of an `input_mode="any"` batch goes."""

from __future__ import annotations

from eos._core._parts import HASH_COLUMN, PART_COLUMN
from eos.config import Config


def place(df, config: Config, columns: list[str], key: str | None):
    """P1: `columns` of `df`, each row with its content hash and its part, in `config.parts` Spark
    partitions, partition i holding exactly the rows of part i. `repartition(n, cols)` is a hash
    partitioning, `pmod(murmur3(cols), n)`: a function of the rows alone (not of Spark's upstream
    partitioning), and not one AQE coalesces."""
    from pyspark.sql import functions as F

    n = config.parts
    hashed = [F.isnull(F.col(key)), *map(F.col, columns)] if key else list(map(F.col, columns))
    df = df.select(*columns).withColumn(HASH_COLUMN, F.xxhash64(*hashed))
    if config.part_columns:
        by = [F.col(c.strip()) for c in config.part_columns.split(",") if c.strip()]
    elif key:
        # By key: a key's rows stay in one part (one producer: its order across batches is kept);
        # rows without a key by content, so that a null key does not put every row in one part.
        by = [F.when(F.col(key).isNull(), F.col(HASH_COLUMN)).otherwise(F.xxhash64(F.col(key)))]
    else:
        by = [F.col(HASH_COLUMN)]
    return df.withColumn(PART_COLUMN, F.pmod(F.hash(*by), F.lit(n))).repartition(n, *by)
