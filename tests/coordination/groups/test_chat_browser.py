"""The chat on an agent's page, in Chromium on a real Daphne with a real
Celery worker answering through the scripted LLM server: the partner's
message, the agent's text as it streams, a tool-call row with its
arguments and result, the memory panel updated, the answer."""

from collections.abc import Iterator

import pytest

from coordination.groups.models import AgentGroup
from memory.blocks.services import block_create
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_update
from tests.conftest import BROWSER_WAIT_MS, celery_worker, daphne_process
from tests.factories import AgentFactory
from tests.fake_llm import Streamed
from tests.pattern_site.test_dashboard_browser import signed_in_page

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def site(llm, settings, redis_url, monkeypatch, transactional_db) -> Iterator[str]:
    """Daphne and a worker sharing Redis (broker and channel layer), both
    pointed at the scripted LLM server; yields Daphne's base URL."""
    for name, value in {
        "PATTERN_REDIS_URL": redis_url,
        "PATTERN_LLM_BASE_URL": settings.LLM_BASE_URL,
        "PATTERN_LLM_API_KEY": "test-key",
        "PATTERN_LLM_MODEL": "test-model",
        "PATTERN_ACTIVITY_EMBEDDER": "",
        "PATTERN_GROUPS_LLM_CHUNK_SECONDS": "0",
    }.items():
        monkeypatch.setenv(name, value)
    with celery_worker(redis_url), daphne_process() as url:
        yield url


def test_the_partner_chats_and_sees_text_stream_and_a_tool_call(
    site, browser, llm, partner, constellation
):
    flux = agent_update(
        agent=AgentFactory(constellation=constellation, name="Flux"),
        model_name="test-model",
        answered_by_llm=True,
    )
    block_create(actor=Actor.system(), label="human", owner=flux)
    llm.answers.append(
        (
            200,
            Streamed(
                ["Saving ", "that ", "now."],
                tool_calls=(
                    (
                        "c1",
                        "core_memory_append",
                        '{"label": "human", "content": "likes green tea"}',
                    ),
                ),
            ),
            0.0,
        )
    )
    llm.answer_tools(("c2", "send_message", {"message": "Noted: green tea."}))
    page = signed_in_page(browser, site, partner, viewport=PHONE)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{site}/agents/{flux.pk}/")
    panel = page.locator('[data-agent-panel="blocks"]')
    before = panel.inner_text()

    page.fill("#chat-message", "remember that I like green tea")
    page.keyboard.press("Enter")

    page.wait_for_selector('[data-testid="chat-answer"]', timeout=BROWSER_WAIT_MS)
    turn = page.locator('[data-testid="chat-turn"]')
    assert "Saving that now." in turn.inner_text()
    row = page.locator('[data-testid="chat-tool"]')
    assert row.count() == 1
    assert "core_memory_append" in row.locator("summary").inner_text()
    row.locator("summary").click()
    shown = row.inner_text()
    assert "likes green tea" in shown and "done" in shown
    assert page.locator('[data-testid="chat-answer"]').inner_text() == (
        "Noted: green tea."
    )
    mine = page.locator(".chat-partner").last.inner_text()
    assert "partner" in mine and "remember that I like green tea" in mine
    # The agent's memory edit reached the page's block panel.
    page.wait_for_function(
        "(before) => document.querySelector('[data-agent-panel=blocks]')"
        ".innerText !== before",
        arg=before,
        timeout=BROWSER_WAIT_MS,
    )
    width = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
    assert width[0] <= width[1]
    assert AgentGroup.objects.filter(name="Chat with Flux").exists()
    # After a reload the conversation is the history, with the same row.
    page.reload()
    assert page.locator("details.chat-tool").count() == 1
    assert "Noted: green tea." in page.locator("[data-chat-log]").inner_text()
    assert errors == []
