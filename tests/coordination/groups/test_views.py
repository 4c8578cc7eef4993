"""Dashboard pages of groups: list, create, members, pattern forms, runs."""

import pytest
from django.test import Client

from coordination.groups.models import AgentGroup, GroupRun
from tests.factories import ConstellationFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser_client(partner) -> Client:
    client = Client()
    client.force_login(partner)
    return client


def test_groups_page_lists_groups_with_members_and_creates_one(
    browser_client, constellation, make_group
):
    make_group("round_robin", [("Momentum", "regular")], name="Crisis Response")
    page = browser_client.get(f"/groups/constellations/{constellation.pk}/")
    assert b"Crisis Response" in page.content and b"Momentum" in page.content
    response = browser_client.post(
        f"/groups/constellations/{constellation.pk}/",
        {"name": "Planning", "pattern": "supervisor", "description": ""},
    )
    group = AgentGroup.objects.get(name="Planning")
    assert response["Location"] == f"/groups/{group.pk}/"
    assert group.config["fallback_behavior"] == "handle_self"


def test_the_group_page_has_a_real_form_per_pattern(browser_client, make_group):
    group = make_group("voting", [("Flux", "regular")], {"quorum": 1})
    html = browser_client.get(f"/groups/{group.pk}/").content.decode()
    for pattern in ("supervisor", "round_robin", "voting", "pipeline", "dynamic"):
        assert f'data-pattern="{pattern}"' in html
    assert 'name="voting-quorum"' in html and 'value="1"' in html
    assert 'name="pipeline-stages-TOTAL_FORMS"' in html
    assert 'name="sleeptime-triggers-TOTAL_FORMS"' in html
    assert "<textarea" not in html.split("data-pattern-form")[1]


def test_configuring_a_pipeline_through_the_form(browser_client, make_group, agents):
    group = make_group("round_robin", [("Entropy", "regular"), ("Flux", "regular")])
    response = browser_client.post(
        f"/groups/{group.pk}/configure/",
        {
            "pattern": "pipeline",
            "pipeline-parallel_stages": "",
            "pipeline-stages-TOTAL_FORMS": "2",
            "pipeline-stages-INITIAL_FORMS": "0",
            "pipeline-stages-MIN_NUM_FORMS": "1",
            "pipeline-stages-MAX_NUM_FORMS": "1000",
            "pipeline-stages-0-name": "analysis",
            "pipeline-stages-0-agent_ids": [str(agents["Entropy"].pk)],
            "pipeline-stages-0-timeout": "60",
            "pipeline-stages-0-on_failure": "skip",
            "pipeline-stages-0-max_attempts": "2",
            "pipeline-stages-1-name": "scheduling",
            "pipeline-stages-1-agent_ids": [str(agents["Flux"].pk)],
            "pipeline-stages-1-timeout": "90",
            "pipeline-stages-1-on_failure": "retry",
            "pipeline-stages-1-max_attempts": "3",
        },
    )
    assert response.status_code == 302
    group.refresh_from_db()
    assert group.pattern == "pipeline"
    assert [
        (s["name"], s["agent_ids"], s["on_failure"]) for s in group.config["stages"]
    ] == [
        ("analysis", [agents["Entropy"].pk], "skip"),
        ("scheduling", [agents["Flux"].pk], "retry"),
    ]
    html = browser_client.get(f"/groups/{group.pk}/").content.decode()
    assert 'value="scheduling"' in html


def test_configuring_sleeptime_triggers_through_the_form(
    browser_client, make_group, agents
):
    group = make_group("round_robin", [("Archive", "supervisor")])
    response = browser_client.post(
        f"/groups/{group.pk}/configure/",
        {
            "pattern": "sleeptime",
            "sleeptime-check_interval": "1200",
            "sleeptime-intervention_agent_id": str(agents["Archive"].pk),
            "sleeptime-triggers-TOTAL_FORMS": "1",
            "sleeptime-triggers-INITIAL_FORMS": "0",
            "sleeptime-triggers-MIN_NUM_FORMS": "0",
            "sleeptime-triggers-MAX_NUM_FORMS": "1000",
            "sleeptime-triggers-0-name": "hyperfocus_check",
            "sleeptime-triggers-0-priority": "high",
            "sleeptime-triggers-0-kind": "time_elapsed",
            "sleeptime-triggers-0-duration": "5400",
        },
    )
    assert response.status_code == 302
    group.refresh_from_db()
    assert group.config["triggers"] == [
        {
            "name": "hyperfocus_check",
            "priority": "high",
            "condition": {"kind": "time_elapsed", "duration": 5400.0},
        }
    ]


def test_a_refused_configuration_shows_why_and_changes_nothing(
    browser_client, make_group
):
    group = make_group("round_robin", [("Flux", "regular")])
    response = browser_client.post(
        f"/groups/{group.pk}/configure/",
        {
            "pattern": "sleeptime",
            "sleeptime-check_interval": "60",
            "sleeptime-intervention_agent_id": "",
            "sleeptime-triggers-TOTAL_FORMS": "1",
            "sleeptime-triggers-INITIAL_FORMS": "0",
            "sleeptime-triggers-0-name": "stress",
            "sleeptime-triggers-0-priority": "high",
            "sleeptime-triggers-0-kind": "threshold_exceeded",
        },
    )
    assert response.status_code == 422
    assert b"needed for a threshold_exceeded trigger" in response.content
    group.refresh_from_db()
    assert group.pattern == "round_robin"


def test_adding_a_member_and_sending_a_message_opens_the_run_viewer(
    browser_client, make_group, agents
):
    group = make_group("round_robin", [])
    browser_client.post(
        f"/groups/{group.pk}/members/",
        {
            "agent": agents["Flux"].pk,
            "role": "specialist",
            "domain": "time",
            "capabilities": "schedules, estimates",
        },
    )
    membership = group.memberships.get()
    assert membership.capabilities == ["schedules", "estimates"]
    response = browser_client.post(
        f"/groups/{group.pk}/messages/", {"message": "when is lunch?"}
    )
    run = GroupRun.objects.get()
    assert response["Location"] == f"/groups/runs/{run.pk}/"
    page = browser_client.get(response["Location"]).content.decode()
    assert "when is lunch?" in page
    assert 'data-run-id="' in page
    # Who started it, by name, not as a ref like "human:1".
    assert "Started by partner" in page


def test_another_constellations_group_page_is_not_found(browser_client):
    other = ConstellationFactory(name="Elsewhere")
    group = AgentGroup.objects.create(
        constellation=other, name="Theirs", pattern="dynamic"
    )
    assert browser_client.get(f"/groups/{group.pk}/").status_code == 404
    response = browser_client.post(f"/groups/{group.pk}/messages/", {"message": "x"})
    assert not GroupRun.objects.exists()
    assert response.status_code in (302, 404)
