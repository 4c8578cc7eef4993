"""Seed the demo constellation into an empty database and print its logins.

Agents come from coordination; their first memory blocks from memory.
"""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import transaction

from activity.stream.services import activity_recording
from memory.demo import memory_demo_seed
from pattern_site.kernel.agents.services import (
    demo_constellation_seed,
    demo_login_write,
)


class Command(BaseCommand):
    help = "Create the demo constellation (partner login, six agents, blocks)."

    def handle(self, *args: Any, **options: Any) -> None:
        # What the site sets up for itself is not activity: it would crowd
        # the first real events out of the feed and the agents' context.
        with activity_recording(enabled=False), transaction.atomic():
            seed = demo_constellation_seed(
                password=getattr(settings, "DEMO_PASSWORD", "") or ""
            )
            blocks = memory_demo_seed(constellation=seed.constellation) if seed else 0
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
        login_file = demo_login_write(seed=seed)
        self.stdout.write(f"  Log in as: {seed.username} / {seed.password}")
        self.stdout.write(f"  (kept in {login_file}, readable by you alone)")
        self.stdout.write("  Agent tokens (shown once):")
        for name, token in seed.tokens.items():
            self.stdout.write(f"    {name:<9} {token}")
