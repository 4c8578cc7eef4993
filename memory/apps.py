from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        # Registers archival entries and messages as searchable tables.
        from memory.longterm import indexes  # noqa: F401
