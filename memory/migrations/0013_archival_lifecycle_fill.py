"""Entries stored before consolidation existed were all meant to be kept,
so they become long-term agent-tier entries; entries a person filed
(source ``user``) now say ``partner``.  Backwards turns ``partner`` and
``import`` back into ``user``.

Apart from 0012: on PostgreSQL, updating rows in the transaction that
altered the table leaves trigger events pending that block its indexes.
"""

from django.db import migrations


def lifecycle_fill(apps, schema_editor):
    entries = apps.get_model("memory", "ArchivalEntry").objects
    entries.update(lifetime="long_term", tier="agent")
    entries.filter(source="user").update(source="partner")


def lifecycle_unfill(apps, schema_editor):
    entries = apps.get_model("memory", "ArchivalEntry").objects
    entries.filter(source__in=["partner", "import"]).update(source="user")


class Migration(migrations.Migration):
    dependencies = [("memory", "0012_archival_lifecycle")]

    operations = [migrations.RunPython(lifecycle_fill, lifecycle_unfill)]
