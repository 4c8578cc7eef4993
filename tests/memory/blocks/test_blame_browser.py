"""The block page's blame toggle in Chromium on real Daphne."""

import pytest

from coordination.actors import Actor
from memory.blocks.services import block_append, block_create, block_share
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
