"""The block page, approvals and the dashboard frame in Chromium on real Daphne."""

from collections.abc import Iterator

import pytest

from memory.blocks.selectors import block_value
from memory.blocks.services import block_create, block_operate
from memory.longterm.services import archival_entry_create
from memory.models import BlockApproval, BlockUpdate, MemoryBlock
from pattern_site.kernel.actors import Actor
from tests.conftest import BROWSER_WAIT_MS, daphne_process
from tests.memory.blocks.test_editor_browser import _agent_operates, _page

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PHONE = {"width": 390, "height": 844}


def test_typing_a_sentence_makes_one_version(
    built_assets, daphne_server, browser, partner, agent
):
    block = block_create(actor=Actor.system(), label="plan", owner=agent, content="")
    before = BlockUpdate.objects.filter(block=block).count()
    page = _page(browser, daphne_server, partner, f"/memory/blocks/{block.pk}/")
    sentence = "The quick brown fox jumps over the lazy dog."

    page.click(".cm-content")
    page.keyboard.type(sentence, delay=20)

    page.wait_for_function(
        "document.querySelector('[data-testid=history-count]').textContent"
        f".includes('({before + 1} version')",
        timeout=BROWSER_WAIT_MS,
    )
    assert block_value(block=block) == sentence
    assert BlockUpdate.objects.filter(block=block).count() == before + 1
    assert page.locator("[data-live=history-rows] tr").count() == before + 1


def test_a_field_saved_through_its_form_shows_live_on_another_page(
    built_assets, daphne_server, browser, partner, agent
):
    block = block_create(
        actor=Actor.system(), label="human", owner=agent, template="human"
    )
    path = f"/memory/blocks/{block.pk}/"
    editing = _page(browser, daphne_server, partner, path)
    watching = _page(browser, daphne_server, partner, path)

    editing.fill("[name='f:name']", "Sam")
    editing.click("[data-item-add]")
    editing.keyboard.type("green tea")
    # While the form is being filled in, an agent sets another field: the
    # form keeps what is typed, and saving leaves the agent's field alone.
    _agent_operates(
        daphne_server,
        agent,
        block,
        {"op": "set_field", "field": "context", "value": "at work"},
    )
    editing.wait_for_selector("[data-testid=structured-form][data-stale]")
    assert editing.input_value("[name='f:name']") == "Sam"
    editing.click("[data-testid=structured-form] button[type=submit]")

    watching.wait_for_function(
        "document.querySelector(\"[name='f:name']\").value === 'Sam'",
        timeout=BROWSER_WAIT_MS,
    )
    watching.wait_for_function(
        "document.querySelector('[data-testid=rendered]').textContent"
        ".includes('name: Sam')",
        timeout=BROWSER_WAIT_MS,
    )
    assert watching.input_value("[data-list-editor] input[type=text]") == "green tea"
    assert block_value(block=block) == {
        "name": "Sam",
        "preferences": ["green tea"],
        "context": "at work",
    }


def test_an_agents_edit_is_named_on_the_page(
    built_assets, daphne_server, browser, partner, agent
):
    block = block_create(
        actor=Actor.system(), label="human", owner=agent, template="human"
    )
    page = _page(browser, daphne_server, partner, f"/memory/blocks/{block.pk}/")

    # Through the server's tool API, so that the change reaches the page.
    _agent_operates(
        daphne_server,
        agent,
        block,
        {"op": "set_field", "field": "name", "value": "Robin"},
    )

    page.wait_for_selector("[data-testid=agent-mark]:visible", timeout=BROWSER_WAIT_MS)
    assert page.inner_text("[data-testid=agent-mark]") == f"{agent.name} is editing"
    assert "name: Robin" in page.inner_text("[data-testid=rendered]")


def test_an_old_agent_edit_is_not_announced_when_the_page_opens(
    built_assets, daphne_server, browser, partner, agent
):
    block = block_create(
        actor=Actor.system(), label="human", owner=agent, template="human"
    )
    _agent_operates(
        daphne_server,
        agent,
        block,
        {"op": "set_field", "field": "name", "value": "Robin"},
    )
    page = _page(browser, daphne_server, partner, f"/memory/blocks/{block.pk}/")
    # A refresh after opening finds the agent's edit as the newest version,
    # which the page already showed: nobody is editing.
    page.evaluate("document.dispatchEvent(new Event('block-change'))")
    page.wait_for_function("Number(document.body.dataset.refreshes || 0) >= 1")
    assert page.is_hidden("[data-testid=agent-mark]")


def test_approval_shows_a_preview_and_a_rejection_stays_on_the_inbox(
    built_assets, daphne_server, browser, partner, agent
):
    block = block_create(
        actor=Actor.system(),
        label="human",
        owner=agent,
        content="Sam likes tea",
        permission="partner",
    )
    block_operate(
        actor=Actor.for_agent(agent),
        block=block,
        operations=[{"op": "set_text", "text": "Sam likes coffee"}],
        summary="taste changed",
    )
    page = _page(browser, daphne_server, partner, "/memory/approvals/", ready=False)

    assert page.inner_text("[data-testid=approvals-badge]") == "1"
    preview = page.locator("[data-testid=approval-preview]")
    assert (
        preview.locator(".diff-inline tr.diff-removed")
        .inner_text()
        .endswith("Sam likes tea")
    )
    assert (
        preview.locator(".diff-inline tr.diff-added")
        .inner_text()
        .endswith("Sam likes coffee")
    )
    page.click("[data-testid=approval-preview] [data-diff-layout=split]")
    assert preview.locator(".diff-split").is_visible()

    page.fill("[name=reason]", "we never discussed coffee")
    page.click("button[value=reject]")
    page.wait_for_selector("text=Request rejected.")

    assert page.url.endswith("/memory/approvals/")
    approval = BlockApproval.objects.get()
    assert (approval.status, approval.result) == (
        "rejected",
        "we never discussed coffee",
    )
    assert page.locator("[data-testid=approvals-badge]").count() == 0
    assert block_value(block=block) == "Sam likes tea"


def test_delete_asks_for_confirmation(
    built_assets, daphne_server, browser, partner, agent
):
    block = block_create(actor=Actor.system(), label="old", owner=agent, content="x")
    page = _page(browser, daphne_server, partner, f"/memory/blocks/{block.pk}/")
    page.keyboard.press("/")  # the search shortcut, outside any field
    assert page.evaluate("document.activeElement.name") == "q"
    page.keyboard.press("Escape")
    page.evaluate("document.activeElement.blur()")

    page.click("[data-testid=delete-block] button")
    dialog = page.locator("[data-testid=confirm-dialog]")
    assert "Delete the block old" in dialog.inner_text()
    dialog.locator("text=Cancel").click()
    assert MemoryBlock.objects.filter(pk=block.pk).exists()

    page.click("[data-testid=delete-block] button")
    page.locator("[data-testid=confirm-dialog] >> text=Delete block").click()
    page.wait_for_selector("text=Deleted block 'old'.")
    assert not MemoryBlock.objects.filter(pk=block.pk).exists()


@pytest.mark.parametrize("template", [None, "scratchpad"])
def test_pages_fit_a_phone_without_horizontal_scroll(
    built_assets, daphne_server, browser, partner, agent, template
):
    block = block_create(
        actor=Actor.system(),
        label="wide",
        owner=agent,
        template=template,
        content=None if template else "a-very-long-unbroken-word-" * 12,
    )
    for n in range(3):
        block_operate(
            actor=Actor.for_agent(agent),
            block=block,
            operations=[
                {"op": "append_text", "text": f" {n}", "section": "notes"}
                if template
                else {"op": "append_text", "text": f" {n}"}
            ],
        )
    page = _page(
        browser,
        daphne_server,
        partner,
        f"/memory/blocks/{block.pk}/?version=2",
        viewport=PHONE,
    )
    for path in (
        None,
        "/",
        f"/agents/{agent.pk}/",
        "/memory/approvals/",
        "/memory/search/?q=word",
    ):
        if path:
            page.goto(f"{daphne_server}{path}")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{path or 'block page'} is {width}px wide"


# The relative luminance (WCAG) of a computed CSS rgb() colour.
LUMINANCE = """(color) => {
  const [r, g, b] = color.match(/[\\d.]+/g).slice(0, 3).map((v) => {
    const c = Number(v) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}"""


@pytest.mark.parametrize("viewport", [None, PHONE], ids=["desktop", "phone"])
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_editor_follows_the_pages_colour_scheme(
    built_assets, daphne_server, browser, partner, agent, scheme, viewport
):
    block = block_create(
        actor=Actor.system(), label="plan", owner=agent, content="legible text"
    )
    page = _page(
        browser,
        daphne_server,
        partner,
        f"/memory/blocks/{block.pk}/",
        viewport=viewport,
        color_scheme=scheme,
    )
    colours = page.evaluate(
        """() => {
          // What shows behind an element: the first background that is not
          // transparent, from the element up.
          const behind = (css) => {
            for (let el = document.querySelector(css); el; el = el.parentElement) {
              const colour = getComputedStyle(el).backgroundColor;
              if (!/^rgba\\(.*, 0\\)$/.test(colour)) return colour;
            }
            return "rgb(255, 255, 255)";
          };
          return {
            page: behind(".card"),
            editor: behind(".cm-content"),
            text: getComputedStyle(document.querySelector(".cm-line")).color,
          };
        }"""
    )
    luminance = {key: page.evaluate(LUMINANCE, value) for key, value in colours.items()}
    # Contrast ratio of the text on the editor: WCAG asks 4.5 at least.
    light, dark = sorted((luminance["editor"], luminance["text"]), reverse=True)
    assert (light + 0.05) / (dark + 0.05) >= 4.5, colours
    # The editor is dark on a dark page and light on a light one.
    assert (luminance["editor"] < 0.2) == (scheme == "dark"), colours
    assert (luminance["page"] < 0.2) == (scheme == "dark"), colours


def old_heartbeat() -> dict:
    """A health report's worker section whose last heartbeat is 2 minutes old."""
    return {
        "ok": False,
        "last_heartbeat_seconds_ago": 120.0,
        "detail": "no worker heartbeat for 120 s",
    }


@pytest.fixture
def daphne_old_worker(transactional_db: None) -> Iterator[str]:
    """Daphne whose health report says no worker was seen for two minutes."""
    with daphne_process(
        PATTERN_DASHBOARD_WORKER_STATUS=f"{__name__}.old_heartbeat"
    ) as url:
        yield url


def test_every_page_shows_a_banner_when_no_worker_was_seen(
    built_assets, daphne_old_worker, browser, partner, agent
):
    page = _page(browser, daphne_old_worker, partner, "/", ready=False)
    for path in ("/", f"/agents/{agent.pk}/", "/memory/search/"):
        page.goto(f"{daphne_old_worker}{path}")
        banner = page.inner_text("[data-testid=worker-banner]")
        assert "No background worker seen for 2 minutes" in banner


def test_search_runs_as_you_type(built_assets, daphne_server, browser, partner, agent):
    for text in ("the heron nests by the lake", "a kingfisher on the wire"):
        archival_entry_create(agent=agent, content=text)
    page = _page(browser, daphne_server, partner, "/memory/search/", ready=False)
    page.click("text=More filters")
    page.select_option("[name=mode]", "fts")

    page.locator("#q").press_sequentially("kingfisher", delay=40)

    page.wait_for_selector("[data-testid=search-result]", timeout=BROWSER_WAIT_MS)
    results = page.locator("[data-testid=search-result]")
    assert results.count() == 1 and "kingfisher" in results.inner_text()
    assert "q=kingfisher" in page.url  # the address follows, for reload and sharing
    assert page.evaluate("document.activeElement.id") == "q"  # still typing


def test_scores_show_behind_the_ranking_toggle(
    built_assets, daphne_server, browser, partner, agent, tmp_path
):
    for text in ("the heron nests by the lake", "a heron on the wire at dusk"):
        archival_entry_create(agent=agent, content=text, tags=["birds"])
    page = _page(
        browser, daphne_server, partner, "/memory/search/?q=heron", ready=False
    )
    results = page.locator("[data-testid=search-result]")
    assert results.count() == 2
    assert page.locator("[data-testid=hit-scores]").count() == 0
    page.screenshot(path=str(tmp_path / "search.png"), full_page=True)

    page.check("[data-testid=explain-toggle]")

    page.wait_for_selector("[data-testid=hit-scores]", timeout=BROWSER_WAIT_MS)
    assert page.locator("[data-testid=hit-scores]").count() == 2
    assert "keyword rank" in page.inner_text("[data-testid=hit-scores] >> nth=0")
    assert "explain=1" in page.url  # a reload keeps the scores shown
    page.screenshot(path=str(tmp_path / "search-explained.png"), full_page=True)
