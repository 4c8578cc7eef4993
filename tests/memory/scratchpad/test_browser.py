"""Working notes on the conversation page in Chromium on real Daphne."""

from pathlib import Path
from typing import Any

import pytest

from memory.longterm.services import conversation_start, messages_append
from memory.scratchpad.services import scratchpad_write
from tests.memory.blocks.test_editor_browser import _page

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_working_notes_read_as_notes_on_the_conversation_page(
    built_assets: Path,
    daphne_server: str,
    browser: Any,
    partner: Any,
    agent: Any,
    tmp_path: Path,
) -> None:
    conversation = conversation_start(agent=agent, title="Quarterly report")
    messages_append(
        conversation=conversation,
        messages=[{"role": "user", "content": "Draft the quarterly report."}],
    )
    scratchpad_write(
        conversation=conversation,
        key="sources",
        value={"sales": "figures.xlsx", "checked": ["Q1", "Q2"]},
    )
    scratchpad_write(conversation=conversation, key="next_step", value="draw charts")

    page = _page(
        browser,
        daphne_server,
        partner,
        f"/memory/conversations/{conversation.pk}/",
        ready=False,
    )
    notes = page.locator("[data-testid=working-notes] .note")
    assert notes.count() == 2
    assert notes.nth(0).locator("dt code").inner_text() == "next_step"
    assert notes.nth(0).locator("dd").inner_text() == "draw charts"
    assert '"sales": "figures.xlsx"' in notes.nth(1).locator("pre").inner_text()
    # Read-only: nothing on the panel edits a note.
    panel = page.locator("[data-testid=working-notes]")
    assert panel.locator("input, textarea, button, form").count() == 0
    page.screenshot(path=str(tmp_path / "working-notes.png"), full_page=True)
