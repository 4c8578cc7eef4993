# Re-shard the binary vector tables of the search index from 4 to 8 shards
# (memory.retrieval.TextIndex.shards): sqlite-vec 0.1.9's top-k selection
# costs rows * k per shard, so eight shards of k/8 each halve the quantised
# coarse pass.  vec0 cannot update a partition key in place nor be renamed:
# the rows go through a temporary table into a new vec0 table.  SQLite only.

from django.db import migrations

INDEXED_TABLES = ("memory_archivalentry", "memory_message")


def _reshard(shards):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "sqlite":
            return
        for table in INDEXED_TABLES:
            vbin = f"{table}_vbin"
            schema_editor.execute(f"DROP TABLE IF EXISTS temp.{vbin}_old")
            schema_editor.execute(
                f"CREATE TEMP TABLE {vbin}_old AS"
                f" SELECT rowid AS id, scope_id, owner_id, vector FROM {vbin}"
            )
            schema_editor.execute(f"DROP TABLE {vbin}")
            schema_editor.execute(
                f"CREATE VIRTUAL TABLE {vbin} USING vec0(embedding bit[384],"
                " scope_id integer partition key, owner_id integer,"
                " shard integer partition key, +vector blob)"
            )
            schema_editor.execute(
                f"INSERT INTO {vbin}(rowid, embedding, scope_id, owner_id, shard,"
                " vector) SELECT id, vec_quantize_binary(vector), scope_id,"
                f" owner_id, id % {shards}, vector FROM temp.{vbin}_old"
            )
            schema_editor.execute(f"DROP TABLE temp.{vbin}_old")

    return run


class Migration(migrations.Migration):
    dependencies = [("memory", "0003_longterm")]

    operations = [migrations.RunPython(_reshard(8), _reshard(4))]
