"""P1 of docs/protocol.md, on the driver: where each row of an `input_mode="any"` batch goes."""

from __future__ import annotations

from eos._core._parts import HASH_COLUMN, PART_COLUMN, RowPlacement
from eos.errors import ConfigError

#: The metadata of the `eos_part` column `eos.place` adds: how its rows were placed (`format("eos")`
#: reads it, as a data source is told nothing else about the batch's partitioning).
PARTS_KEY = "eos.parts"
BY_KEY = "eos.by"


def place(df, parts: int, part_columns: list[str] | None = None):
    """`df` placed in `parts` parts by content (by `key` where it has one, by `part_columns` where given),
    ready for `.writeStream.format("eos")` with `eos.input.mode` "any": call it last, just before
    `writeStream`. A data source is told neither how many partitions a batch has nor how its rows were
    split, so without a placement a re-run split otherwise (a file source restarted on more cores) would
    write rows again that its first run committed; placed, each row's part is a function of the row and
    the batch's re-run writes each row once."""
    if not isinstance(parts, int) or isinstance(parts, bool) or parts < 1:
        raise ConfigError("parts", f"{parts!r} is not a positive number of parts")
    columns = list(df.columns)
    own = [c for c in (PART_COLUMN, HASH_COLUMN) if c in columns]
    if own:
        raise ConfigError(
            "parts", f"the DataFrame already has {', '.join(own)}: it was placed already (place it once)"
        )
    key = "key" if "key" in columns else None
    placement = RowPlacement.chosen(parts, part_columns or [], key)
    unknown = [c for c in placement.columns if c not in columns]
    if unknown:
        raise ConfigError(
            "part_columns",
            f"names {', '.join(map(repr, unknown))}, not a column of the DataFrame ({', '.join(columns)})",
        )
    return place_batch(df, columns, key, placement)


def placement_of(schema) -> RowPlacement | None:
    """How `eos.place` placed a batch with `schema` (None: it did not)."""
    field = next((f for f in schema.fields if f.name == PART_COLUMN), None)
    metadata = field.metadata if field is not None else {}
    if PARTS_KEY not in metadata:
        return None
    return RowPlacement(int(metadata[PARTS_KEY]), str(metadata.get(BY_KEY) or "content"))


def place_batch(df, columns: list[str], key: str | None, placement: RowPlacement):
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
    part = F.pmod(F.hash(*by), F.lit(n)).alias(PART_COLUMN, metadata={PARTS_KEY: n, BY_KEY: placement.by})
    return df.withColumn(PART_COLUMN, part).repartition(n, *by)


def _hashable(F, column: str, dtype: str):
    """`column` as xxhash64 takes it: Spark refuses to hash a map (DATATYPE_MISMATCH.HASH_MAP_TYPE), so a
    map is hashed as its entries sorted by key, and a struct or array holding one as its JSON text."""
    if dtype.startswith("map<"):
        return F.array_sort(F.map_entries(F.col(column)))
    if "map<" in dtype:
        return F.to_json(F.col(column))
    return F.col(column)
