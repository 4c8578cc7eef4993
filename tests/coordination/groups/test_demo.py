"""The demo constellation's groups (seed 003) and its Archive agent set up
to consolidate memory in sleeptime, with and without an LLM provider."""

from io import StringIO

import pytest
from django.core.management import call_command

from coordination.groups.models import AgentGroup
from coordination.groups.services.sleeptime import NO_PROVIDER, group_sleeptime_check
from memory.context import context_build
from memory.longterm.permissions import archival_is_consolidator
from pattern_site.kernel.agents.models import Agent

pytestmark = pytest.mark.django_db


def seed() -> str:
    out = StringIO()
    call_command("seed_demo", stdout=out, stderr=StringIO())
    return out.getvalue()


def test_the_demo_has_the_seeds_groups_and_a_consolidating_archive(settings):
    settings.LLM_BASE_URL = ""
    output = seed()

    groups = {g.name: g for g in AgentGroup.objects.all()}
    assert {name: g.pattern for name, g in groups.items()} == {
        "Main Support": "dynamic",
        "Crisis Response": "round_robin",
        "Planning": "supervisor",
        "Memory Consolidation": "sleeptime",
    }
    archive = Agent.objects.get(name="Archive")
    assert groups["Memory Consolidation"].config["intervention_agent_id"] == (
        archive.pk
    )
    assert archive.answered_by_llm and archive_is_only_consolidator(archive)
    flux = Agent.objects.get(name="Flux")
    system = context_build(agent=flux).system_prompt
    assert '<block:shared_insights permission="ReadOnly" shared_from="Archive">' in (
        system
    )
    assert "once an LLM provider is configured" in output


def archive_is_only_consolidator(archive: Agent) -> bool:
    return [a.pk for a in Agent.objects.all() if archival_is_consolidator(a.pk)] == [
        archive.pk
    ]


def test_without_an_llm_the_sleeptime_check_skips_archive_and_the_page_says_so(
    settings, client
):
    settings.LLM_BASE_URL = ""
    seed()
    group = AgentGroup.objects.get(name="Memory Consolidation")
    later = group.created_at.replace(year=group.created_at.year + 1)

    assert group_sleeptime_check(group_id=group.pk, now=later) is None

    group.refresh_from_db()
    assert group.state["skipped"] == NO_PROVIDER
    assert not group.runs.exists()
    client.force_login(group.constellation.partner)
    page = client.get(f"/groups/{group.pk}/").content.decode()
    assert "sleeptime interventions do not run until one is" in page
