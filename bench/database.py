"""A fresh database for the benchmarks that run the site's processes."""

from __future__ import annotations

import os
from typing import Any


def migrated_agent(env: dict[str, str], *, partner: str, agent: str) -> Any:
    """Point Django at ``env``'s database (and set up Django), migrate it,
    and create a partner, their constellation and an agent in it."""
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    from coordination.models import Constellation
    from tests.factories import AgentFactory, UserFactory

    call_command("migrate", verbosity=0)
    constellation = Constellation.objects.create(
        name=partner.title(), partner=UserFactory(username=partner)
    )
    return AgentFactory(constellation=constellation, name=agent)
