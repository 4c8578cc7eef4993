"""Seed the demo constellation into an empty database and print its logins.

Agents come from the kernel, their first memory blocks from memory, seed
003's groups and the Archive agent's consolidation from the groups.
"""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import transaction

from activity.llm.client import llm_provider_configured
from activity.stream.services import activity_recording
from coordination.groups.demo import groups_demo_seed
from memory.demo import memory_demo_seed
from pattern_site.kernel.agents.services import (
    demo_constellation_seed,
    demo_login_write,
)


class Command(BaseCommand):
    help = "Create the demo constellation (partner login, six agents, blocks, groups)."

    def handle(self, *args: Any, **options: Any) -> None:
        # What the site sets up for itself is not activity: it would crowd
        # the first real events out of the feed and the agents' context.
        with activity_recording(enabled=False), transaction.atomic():
            seed = demo_constellation_seed(
                password=getattr(settings, "DEMO_PASSWORD", "") or ""
            )
            blocks = memory_demo_seed(constellation=seed.constellation) if seed else 0
            groups = groups_demo_seed(constellation=seed.constellation) if seed else []
        if seed is None:
            self.stdout.write(
                "Database already has a constellation; not seeding. Rotate a token"
                " with: python manage.py rotate_agent_token CONSTELLATION NAME"
            )
            return
        self.stdout.write(
            self.style.SUCCESS(
                f"Seeded the demo constellation {seed.constellation.name!r}"
                f" ({len(seed.tokens)} agents, {blocks} memory blocks)."
            )
        )
        self.stdout.write(
            f"  Groups: {', '.join(g.name for g in groups)}; Archive consolidates"
            " memory in sleeptime"
            + (
                "."
                if llm_provider_configured()
                else " once an LLM provider is configured (PATTERN_LLM_BASE_URL)."
            )
        )
        login_file = demo_login_write(seed=seed)
        self.stdout.write(f"  Log in as: {seed.username} / {seed.password}")
        self.stdout.write(f"  (kept in {login_file}, readable by you alone)")
        self.stdout.write("  Agent tokens (shown once):")
        for name, token in seed.tokens.items():
            self.stdout.write(f"    {name:<9} {token}")
