"""The block page's blame toggle in Chromium on real Daphne."""

import pytest

from memory.blocks.services import (
    block_append,
    block_create,
    block_operate,
    block_share,
)
from pattern_site.kernel.actors import Actor
from tests.memory.blocks.test_editor_browser import _page

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_blame_toggle_colours_text_by_author_and_names_the_version_on_hover(
    built_assets, daphne_server, browser, partner, agent, other_agent, tmp_path
):
    block = block_create(
        actor=Actor.system(), label="plan", owner=agent, content="Goals:"
    )
    block_share(
        actor=Actor.system(), block=block, agent=other_agent, access="read_write"
    )
    block_append(actor=Actor.for_agent(agent), block=block, content="ship blame")
    block_append(
        actor=Actor.for_agent(other_agent), block=block, content="then changes"
    )
    page = _page(browser, daphne_server, partner, f"/memory/blocks/{block.pk}/")

    page.click("[data-testid=blame-toggle]")
    page.wait_for_selector("[data-testid=blame] .blame-span")

    spans = page.locator("[data-testid=blame] .blame-span")
    assert spans.count() == 3
    assert spans.nth(1).inner_text() == "\nship blame"
    assert "Version 2 · Entropy (agent)" in spans.nth(1).get_attribute("title")
    assert "append: then changes" in spans.nth(2).get_attribute("title")
    colours = {spans.nth(n).get_attribute("class") for n in range(3)}
    assert len(colours) == 3
    assert page.locator("[data-blame-hides]").is_hidden()
    page.screenshot(path=str(tmp_path / "blame.png"), full_page=False)

    page.click("[data-testid=blame-toggle]")
    assert page.locator("[data-blame-hides]").is_visible()
    assert page.locator("[data-testid=blame]").is_hidden()


def test_blame_toggle_shows_who_set_each_field_of_a_map_block(
    built_assets, daphne_server, browser, partner, agent, other_agent
):
    block = block_create(
        actor=Actor.system(), label="sam", owner=agent, template="human"
    )
    block_share(
        actor=Actor.system(), block=block, agent=other_agent, access="read_write"
    )
    for actor, field, value in [
        (Actor.for_agent(agent), "name", "Sam"),
        (Actor.for_agent(other_agent), "context", "Works from home"),
    ]:
        block_operate(
            actor=actor,
            block=block,
            operations=[{"op": "set_field", "field": field, "value": value}],
        )
    page = _page(browser, daphne_server, partner, f"/memory/blocks/{block.pk}/")

    page.click("[data-testid=blame-toggle]")
    page.wait_for_selector("[data-testid=blame] .blame-span")

    name = page.locator('[data-blame-part="name"] .blame-span')
    context = page.locator('[data-blame-part="context"] .blame-span')
    assert name.inner_text() == "Sam"
    assert "Entropy (agent)" in name.get_attribute("title")
    assert context.inner_text() == "Works from home"
    assert "Flux (agent)" in context.get_attribute("title")
    assert name.get_attribute("class") != context.get_attribute("class")
