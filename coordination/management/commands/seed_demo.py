"""Seed the demo constellation into an empty database and print its logins."""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from coordination.services import demo_constellation_seed


class Command(BaseCommand):
    help = "Create the demo constellation (partner login and six agents) if empty."

    def handle(self, *args: Any, **options: Any) -> None:
        seed = demo_constellation_seed(
            password=getattr(settings, "DEMO_PASSWORD", "") or ""
        )
        if seed is None:
            self.stdout.write(
                "Database already has a constellation; not seeding. Rotate a token"
                " with: python manage.py rotate_agent_token CONSTELLATION NAME"
            )
            return
        self.stdout.write(
            self.style.SUCCESS("Seeded the demo constellation 'Pattern'.")
        )
        self.stdout.write(f"  Log in as: {seed.username} / {seed.password}")
        self.stdout.write("  Agent tokens (shown once):")
        for name, token in seed.tokens.items():
            self.stdout.write(f"    {name:<9} {token}")
