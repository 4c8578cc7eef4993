from django.apps import AppConfig


class CoordinationConfig(AppConfig):
    name = "coordination"
    verbose_name = "Coordination"

    def ready(self) -> None:
        from coordination.work.selectors import handoffs_render_for_agent
        from memory.context import context_section_register

        # Unread handoff notes stay in the recipient's context until read.
        context_section_register(
            name="handoffs", render=handoffs_render_for_agent, order=10
        )
