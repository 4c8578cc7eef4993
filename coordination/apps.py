from django.apps import AppConfig


class CoordinationConfig(AppConfig):
    name = "coordination"
    verbose_name = "Coordination"

    def ready(self) -> None:
        # Importing the tools modules registers coord and route_to_group.
        from activity.stream.permissions import activity_object_kind_register
        from coordination.groups import tools as group_tools  # noqa: F401
        from coordination.groups.selectors import GROUP_RUN, run_ids_readable
        from coordination.work import tools as work_tools  # noqa: F401
        from coordination.work.selectors import (
            HANDOFF,
            TASK,
            handoff_ids_readable,
            handoffs_render_for_agent,
            task_ids_readable,
        )
        from memory.context import context_section_register

        # Events about a task or a handoff are read by whoever may read it.
        activity_object_kind_register(kind=TASK, readable_ids=task_ids_readable)
        activity_object_kind_register(kind=HANDOFF, readable_ids=handoff_ids_readable)
        activity_object_kind_register(kind=GROUP_RUN, readable_ids=run_ids_readable)

        # Unread handoff notes stay in the recipient's context until read.
        context_section_register(
            name="handoffs", render=handoffs_render_for_agent, order=10
        )
