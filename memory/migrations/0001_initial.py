from django.db import migrations


class Migration(migrations.Migration):
    """Starting point of the memory app; its models arrive in later migrations."""

    initial = True

    dependencies = [("coordination", "0001_initial")]

    operations = []
