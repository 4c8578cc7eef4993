from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from coordination.models import Agent
from memory.blocks.selectors import (
    block_history_numbered,
    block_value,
    block_version_view,
)
from memory.models import MemoryBlock
from pattern_site.kernel.agents.roles import role_template_get

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_seed_demo_creates_agents_with_blocks_once():
    output = run("seed_demo")
    names = set(Agent.objects.values_list("name", flat=True))
    assert names == {"Pattern", "Entropy", "Flux", "Momentum", "Anchor", "Archive"}
    assert "Log in as: partner / " in output
    flux = Agent.objects.get(name="Flux")
    labels = set(MemoryBlock.objects.filter(owner=flux).values_list("label", flat=True))
    assert labels == {"persona", "human", "scratchpad", "notes"}
    notes = MemoryBlock.objects.get(owner=flux, label="notes")
    assert notes.schema == {"kind": "text"}
    # Each demo agent is its role template: role and persona text.
    template = role_template_get("Flux")
    assert flux.role == template.role
    persona = MemoryBlock.objects.get(owner=flux, label="persona")
    assert block_value(block=persona)["guidelines"] == template.persona
    assert MemoryBlock.objects.filter(owner=None, label="organization").exists()
    assert "not seeding" in run("seed_demo")


def test_seed_demo_keeps_the_login_for_its_owner_and_the_login_page_points_to_it(
    settings, tmp_path
):
    settings.DATA_DIR = tmp_path
    output = run("seed_demo")
    password = output.split("Log in as: partner / ")[1].split()[0]
    login_file = tmp_path / "demo-login.txt"
    assert login_file.read_text().splitlines() == ["partner", password]
    assert login_file.stat().st_mode & 0o777 == 0o600

    page = Client().get("/login/").content.decode()
    assert "log in as <strong>partner</strong>" in page
    assert str(login_file) in page
    assert password not in page


def test_login_page_of_a_site_without_the_demo_names_no_login(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    page = Client().get("/login/").content.decode()
    assert "demo site" not in page


def test_every_seeded_block_starts_at_its_creation_version_1():
    run("seed_demo")
    blocks = list(MemoryBlock.objects.all())
    assert blocks
    for block in blocks:
        [created] = block_history_numbered(block=block)
        assert (created.number, created.row.summary) == (1, "created"), block.label
        # Nothing changed since: version 1 is the block as seeded.
        view = block_version_view(block=block, version_id=created.row.id)
        assert view.value == block_value(block=block), block.label
    scratchpad = MemoryBlock.objects.get(owner__name="Flux", label="scratchpad")
    client = Client()
    client.force_login(scratchpad.constellation.partner)
    page = client.get(f"/memory/blocks/{scratchpad.pk}/").content.decode()
    assert "(1 version)" in page


def test_seeded_agent_sees_its_persona_and_the_shared_task_board():
    output = run("seed_demo")
    token = next(
        line.split()[-1]
        for line in output.splitlines()
        if line.strip().startswith("Flux")
    )
    blocks = Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/blocks").json()
    labels = {b["label"] for b in blocks}
    assert {"persona", "human", "scratchpad", "organization", "task_board"} <= labels


@pytest.mark.parametrize("label", ["persona", "human", "scratchpad", "notes"])
def test_seeded_agent_can_use_every_letta_tool_on_its_demo_blocks(label):
    output = run("seed_demo")
    token = next(
        line.split()[-1]
        for line in output.splitlines()
        if line.strip().startswith("Flux")
    )
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")

    def call(tool, **body):
        response = client.post(
            f"/api/tools/{tool}", {"label": label, **body}, "application/json"
        )
        assert response.status_code == 200, (tool, response.content)
        return response.json()

    call("core_memory_append", content="Prefers mornings")
    call("core_memory_replace", old_content="mornings", new_content="evenings")
    block = MemoryBlock.objects.get(owner__name="Flux", label=label)
    assert "Prefers evenings" in block.rendered
    call("core_memory_update", content=block.rendered.replace("evenings", "noon"))
    block.refresh_from_db()
    assert "Prefers noon" in block.rendered


def test_the_seeded_task_board_is_a_checkbox_list_an_agent_can_tick():
    output = run("seed_demo")
    token = next(
        line.split()[-1]
        for line in output.splitlines()
        if line.strip().startswith("Flux")
    )
    board = MemoryBlock.objects.get(label="task_board")
    assert board.rendered == "- [ ] Morning check-in with the partner"
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").post(
        f"/api/blocks/{board.pk}/operations",
        {"operations": [{"op": "check_item", "index": 0}]},
        "application/json",
    )
    assert response.status_code == 200, response.content
    board.refresh_from_db()
    assert board.rendered == "- [x] Morning check-in with the partner"


def test_seeding_the_demo_is_not_activity(django_capture_on_commit_callbacks):
    from activity.models import ActivityEvent
    from pattern_site.kernel.agents.services import agent_create

    with django_capture_on_commit_callbacks(execute=True):
        run("seed_demo")
        # What the partner does next is activity again.
        constellation = Agent.objects.first().constellation
        agent_create(constellation=constellation, name="Newcomer")
    texts = set(ActivityEvent.objects.values_list("text", flat=True))
    assert "Newcomer was activated: created" in texts
    assert all("Newcomer" in text for text in texts), texts
