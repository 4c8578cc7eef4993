from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        # Registers archival entries and messages as searchable tables, the
        # search tool's domains of this app beyond them, and (by importing
        # the tools modules) this app's agent tools.
        from activity.stream.permissions import activity_object_kind_register
        from activity.summaries.digest import catch_up_section_register
        from memory import tools  # noqa: F401
        from memory.blocks import tools as block_tools  # noqa: F401
        from memory.blocks.search import block_hit_payload, blocks_domain_search
        from memory.context import (
            changes_since_render,
            changes_while_away_lines,
            context_section_register,
        )
        from memory.longterm import indexes  # noqa: F401
        from memory.longterm import tools as longterm_tools  # noqa: F401
        from memory.longterm.activity import (
            activity_domain_search,
            activity_hit_payload,
        )
        from memory.longterm.domains import search_domain_register
        from memory.longterm.selectors import CONVERSATION, conversation_ids_readable
        from memory.scratchpad import tools as scratchpad_tools  # noqa: F401

        # A message's event is read by whoever may read its conversation.
        activity_object_kind_register(
            kind=CONVERSATION, readable_ids=conversation_ids_readable
        )

        # What others changed in shared blocks since the agent looked.
        context_section_register(
            name="changes_since_last_look", render=changes_since_render, order=20
        )
        # The blocks others changed while the agent was away, in its digest.
        catch_up_section_register(
            title="Memory Changes", lines=changes_while_away_lines, order=25
        )
        search_domain_register(
            name="activity",
            kind="activity",
            search=activity_domain_search,
            payload=activity_hit_payload,
        )
        search_domain_register(
            name="blocks",
            kind="block",
            search=blocks_domain_search,
            payload=block_hit_payload,
            as_of=True,
        )
