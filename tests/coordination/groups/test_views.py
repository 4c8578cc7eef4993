"""Dashboard pages of groups: list, create, members, pattern forms, runs."""

import pytest
from django.test import Client
from django.utils import timezone

from coordination.groups.models import AgentGroup, GroupRun
from coordination.groups.services import (
    delivery_chunk_add,
    delivery_complete,
    delivery_take,
    delivery_tool_call_complete,
    delivery_tool_call_start,
    group_message_route,
)
from pattern_site.kernel.actors import Actor
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


# --- making agents from role templates, and their tool rules ---------------


def test_the_partner_creates_an_agent_from_a_role_template(
    browser_client, constellation
):
    from coordination.groups.turns import loop_config_for
    from memory.blocks.selectors import block_get_by_label_for_agent, block_value
    from pattern_site.kernel.agents.models import Agent, AgentToken
    from pattern_site.kernel.agents.roles import role_template_get

    url = f"/groups/constellations/{constellation.pk}/agents/new/"
    page = browser_client.get(url).content.decode()
    assert 'name="template"' in page and "Task breakdown" in page

    response = browser_client.post(
        url,
        {
            "template": "Entropy",
            "name": "Splitter",
            "model_name": "gpt-4o-mini",
            "answered_by_llm": "on",
        },
    )

    agent = Agent.objects.get(constellation=constellation, name="Splitter")
    template = role_template_get("Entropy")
    assert agent.role == template.role
    assert agent.model_name == "gpt-4o-mini" and agent.answered_by_llm
    persona_block = block_get_by_label_for_agent(agent=agent, label="persona")
    persona = block_value(block=persona_block)
    assert persona["guidelines"] == template.persona
    assert block_get_by_label_for_agent(agent=agent, label="human")
    # The token is on this response only, and only its hash is stored.
    html = response.content.decode()
    raw = html.split('data-testid="token-value" id="new-token">')[1].split("<")[0]
    assert raw.startswith("pat_") and "data-copy" in html
    token = AgentToken.objects.get(agent=agent)
    assert token.key_hash != raw and raw not in token.key_hash
    assert response["Cache-Control"] == "no-store"
    assert raw not in browser_client.get(f"/agents/{agent.pk}/").content.decode()
    assert loop_config_for(agent).tool_rules == []


def test_creating_an_agent_answered_by_the_llm_without_a_model_says_why(
    browser_client, constellation
):
    from pattern_site.kernel.agents.models import Agent

    response = browser_client.post(
        f"/groups/constellations/{constellation.pk}/agents/new/",
        {"template": "Flux", "name": "Clock", "answered_by_llm": "on"},
    )
    assert response.status_code == 422
    assert "set model_name" in response.content.decode()
    assert not Agent.objects.filter(name="Clock").exists()


def test_only_the_partner_creates_agents(constellation, agents):
    from pattern_site.kernel.agents.models import Agent
    from pattern_site.kernel.agents.services import agent_token_issue
    from tests.factories import UserFactory

    url = f"/groups/constellations/{constellation.pk}/agents/new/"
    data = {"template": "Flux", "name": "Clock"}
    member = UserFactory(username="member")
    constellation.members.add(member)
    client = Client()
    client.force_login(member)
    assert client.get(url).status_code == 403
    assert client.post(url, data).status_code == 403
    token = agent_token_issue(agent=agents["Flux"]).raw
    agent_client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert agent_client.post(url, data).status_code == 302  # to the login page
    stranger = Client()
    stranger.force_login(ConstellationFactory(name="Elsewhere").partner)
    assert stranger.post(url, data).status_code == 404
    assert not Agent.objects.filter(name="Clock").exists()
    # Nor do they see the button that leads there.
    page = client.get(f"/constellations/{constellation.pk}/").content.decode()
    assert 'data-testid="agent-new"' not in page


def rule_rows(*rows: tuple[str, str, str]) -> dict[str, str]:
    data = {
        "rules-TOTAL_FORMS": str(len(rows)),
        "rules-INITIAL_FORMS": "0",
        "rules-MIN_NUM_FORMS": "0",
        "rules-MAX_NUM_FORMS": "1000",
    }
    for index, (tool, kind, value) in enumerate(rows):
        data |= {
            f"rules-{index}-tool": tool,
            f"rules-{index}-kind": kind,
            f"rules-{index}-value": value,
        }
    return data


def test_tool_rules_are_set_as_rows_on_the_agent_page(browser_client, agents):
    from coordination.groups.turns import loop_config_for

    flux = agents["Flux"]
    page = browser_client.get(f"/agents/{flux.pk}/").content.decode()
    assert page.count('data-testid="tool-rule-row"') == 2
    assert (
        'name="rules-0-tool"' in page
        and "<textarea"
        not in page.split('data-testid="agent-tool-rules"')[1].split("</section>")[0]
    )

    browser_client.post(
        f"/groups/agents/{flux.pk}/tool-rules/",
        rule_rows(
            ("send_message", "max_calls", "2"),
            ("", "exit_loop", ""),  # a row left at "none" is skipped
        ),
    )

    assert loop_config_for(flux).tool_rules == [
        {"tool": "send_message", "kind": "max_calls", "value": 2}
    ]
    page = browser_client.get(f"/agents/{flux.pk}/").content.decode()
    assert page.count('data-testid="tool-rule-row"') == 3  # the rule + 2 blank


def test_a_broken_tool_rule_is_refused_with_the_reason(browser_client, agents):
    from coordination.groups.turns import loop_config_for

    flux = agents["Flux"]
    response = browser_client.post(
        f"/groups/agents/{flux.pk}/tool-rules/",
        rule_rows(("send_message", "max_calls", "many")),
        HTTP_REFERER=f"/agents/{flux.pk}/",
        follow=True,
    )
    assert "needs a positive integer" in response.content.decode()
    assert loop_config_for(flux).tool_rules == []


def _conversation(client, run):
    return client.get(f"/groups/runs/{run.pk}/conversation/").content.decode()


def _take(agent):
    return delivery_take(agent=agent)[0]


def test_the_run_page_reads_as_a_conversation(browser_client, make_group, agents):
    group = make_group("round_robin", [("Flux", "regular")])
    run = group_message_route(actor=Actor.system(), group=group, message="lunch?")
    delivery = _take(agents["Flux"])
    delivery_chunk_add(delivery=delivery, text="Noon, ")
    delivery_tool_call_start(
        delivery=delivery, call_id="c1", fn_name="calendar_read", args={"day": "Fri"}
    )
    delivery_tool_call_complete(delivery=delivery, call_id="c1", result={"free": True})
    delivery_chunk_add(delivery=delivery, text="salad bar")

    streaming = _conversation(browser_client, run)
    # Streamed pieces read as one reply, by name, while they arrive.
    assert "Noon, salad bar" in streaming
    assert ">Flux</strong>" in streaming
    assert "agent:" not in streaming and "agent_id" not in streaming
    assert "writing…" in streaming
    # The tool call is a row that opens onto its arguments and result.
    assert '<span class="tool-name">calendar_read</span>' in streaming
    assert "&quot;day&quot;: &quot;Fri&quot;" in streaming
    assert "&quot;free&quot;: true" in streaming

    delivery_complete(delivery=delivery, text="Noon at the salad bar")
    page = browser_client.get(f"/groups/runs/{run.pk}/").content.decode()
    assert page.count("Noon at the salad bar") == 1
    assert "Noon, salad bar" not in page
    assert "<code>{" not in page  # no event shown as raw JSON


def test_a_vote_is_shown_as_a_tally(browser_client, make_group, agents):
    group = make_group(
        "voting",
        [("Entropy", "regular"), ("Flux", "regular"), ("Anchor", "regular")],
        {"quorum": 3},
    )
    run = group_message_route(
        actor=Actor.system(), group=group, message="tea or coffee?"
    )
    for name, vote in (("Entropy", "tea"), ("Flux", "coffee")):
        delivery_complete(delivery=_take(agents[name]), text="because", vote=vote)

    html = _conversation(browser_client, run)

    tally = html[html.index('data-testid="tally"') : html.index("</section>")]
    rows = [" ".join(li.split()) for li in tally.split("<li>")[1:]]
    assert rows[0].startswith('<span class="tally-option">tea</span>')
    assert '<strong>1</strong> <span class="muted">· Entropy</span>' in rows[0]
    assert "· Flux" in rows[1]
    # Anchor has not voted yet, and the page says whose vote is awaited.
    assert "Anchor" in html.split('data-testid="tally"')[1]


def test_a_pipeline_shows_its_stages_in_order(browser_client, make_group, agents):
    group = make_group(
        "pipeline",
        [("Entropy", "regular"), ("Flux", "regular")],
        {
            "stages": [
                {"name": "analysis", "agent_ids": [agents["Entropy"].pk]},
                {"name": "scheduling", "agent_ids": [agents["Flux"].pk]},
            ]
        },
    )
    run = group_message_route(actor=Actor.system(), group=group, message="report")
    delivery_complete(delivery=_take(agents["Entropy"]), text="three parts")
    delivery_complete(delivery=_take(agents["Flux"]), text="Tue to Thu")

    html = _conversation(browser_client, run)

    first, second = html.index("Stage 1 · analysis"), html.index("Stage 2 · scheduling")
    assert first < html.index("three parts") < second < html.index("Tue to Thu")


def test_a_run_nobody_takes_says_how_agents_take_work(
    browser_client, make_group, agents
):
    group = make_group("round_robin", [("Flux", "regular")])
    run = group_message_route(actor=Actor.system(), group=group, message="lunch?")

    html = _conversation(browser_client, run)
    assert "Waiting for Flux." in html
    assert "GET /api/inbox" in html

    # A program that asked for anything lately is taken to be attached.
    agents["Flux"].last_active_at = timezone.now()
    agents["Flux"].save(update_fields=["last_active_at"])
    assert "GET /api/inbox" not in _conversation(browser_client, run)
    assert "waiting to be taken" in _conversation(browser_client, run)
