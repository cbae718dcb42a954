"""P1 of docs/protocol.md, on the driver: where each row of an `input_mode="any"` batch goes."""

from __future__ import annotations

from eos._core._parts import HASH_COLUMN, PART_COLUMN, Placement


def place(df, columns: list[str], key: str | None, placement: Placement):
    """P1: `columns` of `df`, each row with its content hash and its part, in `placement.parts` Spark
    partitions, partition i holding exactly the rows of part i. `repartition(n, cols)` is a hash
    partitioning, `pmod(murmur3(cols), n)`: a function of the rows alone (not of Spark's upstream
    partitioning), and not one AQE coalesces."""
    from pyspark.sql import functions as F

    n = placement.parts
    types = dict(df.dtypes)
    content = [_hashable(F, c, types.get(c, "")) for c in columns]
    hashed = [F.isnull(F.col(key)), *content] if key else content
    df = df.select(*columns).withColumn(HASH_COLUMN, F.xxhash64(*hashed))
    if placement.columns:
        by = [F.col(c) for c in placement.columns]
    elif placement.by == "key" and key:
        # By key: a key's rows stay in one part (one producer: its order across batches is kept);
        # rows without a key by content, so that a null key does not put every row in one part.
        by = [F.when(F.col(key).isNull(), F.col(HASH_COLUMN)).otherwise(F.xxhash64(F.col(key)))]
    else:
        by = [F.col(HASH_COLUMN)]
    return df.withColumn(PART_COLUMN, F.pmod(F.hash(*by), F.lit(n))).repartition(n, *by)


def _hashable(F, column: str, dtype: str):
    """`column` as xxhash64 takes it: Spark refuses to hash a map (DATATYPE_MISMATCH.HASH_MAP_TYPE), so a
    map is hashed as its entries sorted by key, and a struct or array holding one as its JSON text."""
    if dtype.startswith("map<"):
        return F.array_sort(F.map_entries(F.col(column)))
    if "map<" in dtype:
        return F.to_json(F.col(column))
    return F.col(column)
