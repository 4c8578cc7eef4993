from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        # Registers archival entries and messages as searchable tables.
        from activity.summaries.digest import catch_up_section_register
        from memory.context import (
            changes_since_render,
            changes_while_away_lines,
            context_section_register,
        )
        from memory.longterm import indexes  # noqa: F401

        # What others changed in shared blocks since the agent looked.
        context_section_register(
            name="changes_since_last_look", render=changes_since_render, order=20
        )
        # The blocks others changed while the agent was away, in its digest.
        catch_up_section_register(
            title="Memory Changes", lines=changes_while_away_lines, order=25
        )
