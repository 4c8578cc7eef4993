"""Dashboard pages of memory: agent page, block page, approvals, context."""

import pytest
from django.test import Client

from memory.blocks.selectors import block_history, block_value
from memory.blocks.services import block_operate, block_share
from memory.models import BlockApproval, MemoryBlock
from pattern_site.kernel.actors import Actor
from tests.factories import AgentFactory, ConstellationFactory


@pytest.fixture
def web(partner):
    client = Client()
    client.force_login(partner)
    return client


def test_agent_page_lists_blocks_with_type_permission_and_size(web, make_block, agent):
    make_block(
        label="persona",
        content="I plan",
        block_type="core",
        permission="append",
        char_limit=2000,
    )
    page = web.get(f"/agents/{agent.pk}/").content.decode()
    assert "persona" in page
    assert "Core" in page and "Append" in page
    assert "6 / 2000" in page


def test_constellation_page_shows_block_counts(web, make_block, constellation, agent):
    make_block(label="a")
    make_block(label="b")
    page = web.get(f"/constellations/{constellation.pk}/").content.decode()
    assert "<td>2</td>" in page
    assert "2 blocks in this constellation" in page


def test_create_block_from_template_in_the_dashboard(web, agent):
    response = web.post(
        f"/memory/agents/{agent.pk}/blocks/new",
        {"label": "human", "template": "human", "permission": "partner"},
    )
    block = MemoryBlock.objects.get(label="human")
    assert response.status_code == 302
    assert response["Location"] == f"/memory/blocks/{block.pk}/"
    assert block.permission == "partner" and block.schema["kind"] == "map"
    page = web.get(response["Location"]).content.decode()
    assert "preferences" in page  # structured fields table


def test_block_page_shows_content_history_and_version(web, make_block, agent):
    block = make_block(label="notes", content="first")
    block_operate(
        actor=Actor.for_agent(agent),
        block=block,
        operations=[{"op": "set_text", "text": "second"}],
        summary="rewrote notes",
    )
    page = web.get(f"/memory/blocks/{block.pk}/?version=1").content.decode()
    assert 'data-testid="rendered"' in page and "second" in page
    assert "rewrote notes" in page and "Entropy" in page
    assert "Content at version 1" in page and "first" in page
    diff = web.get(f"/memory/blocks/{block.pk}/?from=1").content.decode()
    assert '<tr class="diff-removed">' in diff and '<tr class="diff-added">' in diff
    assert "Changes from version 1 to now" in diff


def test_history_is_numbered_per_block_and_pages_to_older_versions(
    web, make_block, agent
):
    make_block(label="other", content="x")  # its rows take ids, not numbers
    block = make_block(label="notes", content="v1")
    for n in range(2, 36):
        block_operate(
            actor=Actor.for_agent(agent),
            block=block,
            operations=[{"op": "set_text", "text": f"v{n}"}],
        )
    page = web.get(f"/memory/blocks/{block.pk}/").content.decode()
    assert "(35 versions)" in page
    assert 'data-version="35"' in page and 'data-version="6"' in page
    assert 'data-version="5"' not in page
    assert 'href="?older=6#history"' in page
    far = web.get(f"/memory/blocks/{block.pk}/?version=2").content.decode()
    assert "Content at version 2" in far  # shown though not on this page
    older = web.get(f"/memory/blocks/{block.pk}/?older=6").content.decode()
    assert 'data-version="5"' in older and 'data-version="1"' in older
    assert 'data-version="6"' not in older


def test_version_fragment_shows_the_version_and_what_it_changed(web, make_block, agent):
    block = make_block(label="notes", content="alpha\nbeta")
    block_operate(
        actor=Actor.for_agent(agent),
        block=block,
        operations=[{"op": "set_text", "text": "alpha\ngamma"}],
    )
    html = web.get(f"/memory/blocks/{block.pk}/versions/2/").content.decode()
    assert "<html" not in html  # a fragment, opened in place
    assert "Changes from version 1 to version 2" in html
    assert '<td class="diff-text">beta</td>' in html
    assert '<td class="diff-text">gamma</td>' in html
    missing = web.get(f"/memory/blocks/{block.pk}/versions/9/")
    assert missing.status_code == 404


def test_field_diff_is_readable_for_structured_blocks(web, make_block):
    block = make_block(label="human", template="human")
    web.post(f"/memory/blocks/{block.pk}/edit", {"f:name": "Sam"})
    web.post(
        f"/memory/blocks/{block.pk}/edit",
        {
            "f:name": "Sam",
            "l:preferences": "1",
            "i:preferences": ["a", "b"],
            "i:preferences#a": "tea",
            "i:preferences#b": "jazz",
        },
    )
    html = web.get(f"/memory/blocks/{block.pk}/compare/?from=1").content.decode()
    assert '<p class="diff-field">preferences</p>' in html
    assert "[" not in html.split("diff-field", 1)[1]  # no Python list notation
    assert '<td class="diff-text">jazz</td>' in html


def test_edit_and_rollback_from_the_dashboard(web, make_block):
    block = make_block(label="notes", content="one")
    web.post(f"/memory/blocks/{block.pk}/edit", {"content": "two\r\nlines"})
    assert block_value(block=block) == "two\nlines"
    last = block_history(block=block)[0]
    assert (last.actor_kind, last.actor_name) == ("human", "partner")
    # Rolling back asks first, as deleting does (the page's script shows
    # the question in a dialog before the form is sent).
    page = web.get(f"/memory/blocks/{block.pk}/?version=1").content.decode()
    rollback = page[page.index(f"/memory/blocks/{block.pk}/rollback") :]
    assert rollback.split(">", 1)[0].count('data-confirm="Roll notes back') == 1
    web.post(f"/memory/blocks/{block.pk}/rollback", {"version": 1})
    assert block_value(block=block) == "one"
    assert block_history(block=block)[0].summary == "rolled back to version 1"


def test_an_empty_blocks_page_lists_its_creation_and_rolls_back_to_it(web, make_block):
    block = make_block(label="notes")
    page = web.get(f"/memory/blocks/{block.pk}/").content.decode()
    assert "(1 version)" in page and 'data-version="1"' in page
    web.post(f"/memory/blocks/{block.pk}/edit", {"content": "two\r\nlines"})

    page = web.get(f"/memory/blocks/{block.pk}/?version=1").content.decode()
    assert "(2 versions)" in page
    # Every version but the newest can be compared with now, the creation too.
    assert 'data-compare-from="1"' in page
    assert 'data-compare-from="2"' not in page
    version = page[page.index('data-testid="version-view"') :]
    assert "Content at version 1" in version
    assert '<pre class="block-rendered"></pre>' in version
    diff = web.get(f"/memory/blocks/{block.pk}/?from=1").content.decode()
    assert "Changes from version 1 to now" in diff
    assert '<td class="diff-text">lines</td>' in diff
    web.post(f"/memory/blocks/{block.pk}/rollback", {"version": 1})
    assert block_value(block=block) == ""
    assert block_history(block=block)[0].summary == "rolled back to version 1"


@pytest.mark.parametrize(
    "target", ["//evil.example/", "https://evil.example/", "javascript:alert(1)"]
)
def test_a_form_never_redirects_off_the_site(web, make_block, target):
    # Over the limit: the form goes back where it came from, with the error.
    block = make_block(label="tiny", content="x", char_limit=3)
    url = f"/memory/blocks/{block.pk}/edit"
    response = web.post(url, {"content": "too long", "next": target})
    assert response.status_code == 302 and response["Location"] == "/"
    response = web.post(url, {"content": "too long"}, HTTP_REFERER=target)
    assert response["Location"] == "/"
    response = web.post(url, {"content": "too long", "next": "/memory/approvals/"})
    assert response["Location"] == "/memory/approvals/"


def test_dashboard_errors_come_back_as_messages(web, make_block):
    block = make_block(label="tiny", content="x", char_limit=3)
    url = f"/memory/blocks/{block.pk}/"
    response = web.post(
        f"/memory/blocks/{block.pk}/edit",
        {"content": "too long", "next": url},
        follow=True,
    )
    assert "is 1/3 chars; this change adds 7" in response.content.decode()


def test_a_refused_form_comes_back_with_its_input_and_the_error_beside_the_field(
    web, make_block
):
    block = make_block(label="notes", content="x")
    url = f"/memory/blocks/{block.pk}/"
    response = web.post(
        f"/memory/blocks/{block.pk}/configure",
        {"form": "settings", "char_limit": "lots", "description": "kept", "next": url},
        follow=True,
    )
    page = response.content.decode()
    assert response.redirect_chain[-1][0] == url
    assert 'data-testid="field-error">char_limit must be a whole number' in page
    assert 'value="lots"' in page and ">kept</textarea>" in page
    again = web.get(url).content.decode()  # shown once
    assert "field-error" not in again


def test_structured_block_is_edited_through_its_form(web, make_block):
    block = make_block(label="human", template="human")
    page = web.get(f"/memory/blocks/{block.pk}/").content.decode()
    assert 'name="f:name"' in page and 'data-name="i:preferences"' in page
    assert '<textarea id="content"' not in page  # no JSON textarea
    web.post(
        f"/memory/blocks/{block.pk}/edit",
        {
            "f:name": "Sam",
            "f:context": "",
            "l:preferences": "1",
            "i:preferences": ["2", "1"],
            "i:preferences#1": "tea",
            "i:preferences#2": "jazz",
            "i:preferences#3": "dropped: its key is not in the order",
        },
    )
    assert block_value(block=block) == {
        "name": "Sam",
        "preferences": ["jazz", "tea"],
        "context": "",
    }


def test_structured_form_keeps_read_only_fields_and_checks_numbers(
    web, make_block, partner
):
    schema = {
        "kind": "composite",
        "sections": [
            {
                "name": "facts",
                "schema": {
                    "kind": "map",
                    "fields": [
                        {"name": "count", "type": "counter"},
                        {"name": "ratio", "type": "number"},
                        {"name": "on", "type": "boolean"},
                        {"name": "fixed", "type": "text", "read_only": True},
                    ],
                },
            },
            {
                "name": "todo",
                "schema": {"kind": "list", "style": "checkbox"},
            },
            {"name": "events", "schema": {"kind": "log"}},
        ],
    }
    block = make_block(label="state", schema=schema)
    url = f"/memory/blocks/{block.pk}/"
    post = {
        "form": "fields",
        "next": url,
        "f:facts/count": "3",
        "f:facts/ratio": "0.5",
        "f:facts/on": "on",
        "b:facts/on": "1",
        "f:facts/fixed": "ignored",
        "l:todo": "1",
        "i:todo": ["a"],
        "i:todo#a": "write tests",
        "i:todo#a.done": "on",
    }
    web.post(f"{url}edit", post)
    value = block_value(block=block)
    assert value["facts"] == {"count": 3, "ratio": 0.5, "on": True, "fixed": ""}
    assert value["todo"] == [{"text": "write tests", "done": True}]
    page = web.post(f"{url}edit", {**post, "f:facts/count": "2.5"}, follow=True)
    html = page.content.decode()
    assert "count is a counter: a whole number" in html
    assert 'value="2.5"' in html
    assert block_value(block=block)["facts"]["count"] == 3


def test_sharing_panel_shares_and_unshares(web, make_block, other_agent):
    block = make_block(label="board")
    web.post(
        f"/memory/blocks/{block.pk}/share",
        {"agent_id": other_agent.pk, "access": "append_only"},
    )
    assert "AppendOnly" in web.get(f"/memory/blocks/{block.pk}/").content.decode()
    web.post(
        f"/memory/blocks/{block.pk}/share", {"agent_id": other_agent.pk, "remove": "1"}
    )
    assert not block.attachments.exists()


def test_approvals_inbox_approve(web, make_block, agent):
    block = make_block(label="human", content="Sam", permission="partner")
    change = block_operate(
        actor=Actor.for_agent(agent),
        block=block,
        operations=[{"op": "append_text", "text": " (likes tea)"}],
        summary="note tea",
    )
    page = web.get("/memory/approvals/").content.decode()
    assert "note tea" in page and "Entropy" in page
    web.post(f"/memory/approvals/{change.approval.pk}/decide", {"decision": "approve"})
    assert block_value(block=block) == "Sam (likes tea)"
    assert BlockApproval.objects.get().status == "approved"


def test_what_this_agent_sees(web, make_block, agent, other_agent):
    make_block(label="persona", content="I plan", block_type="core")
    shared = make_block(
        label="board", owner=other_agent, block_type="core", content="tasks"
    )
    block_share(actor=Actor.system(), block=shared, agent=agent, access="read_only")
    page = web.get(f"/memory/agents/{agent.pk}/context/").content.decode()
    assert "&lt;block:persona permission=&quot;ReadWrite&quot;&gt;" in page
    assert "shared_from=&quot;Flux&quot;" in page
    assert "core_memory" in page


def test_other_constellations_blocks_are_404_on_the_dashboard(web):
    stranger = AgentFactory(constellation=ConstellationFactory())
    from memory.blocks.services import block_create

    block = block_create(actor=Actor.system(), owner=stranger, label="x")
    assert web.get(f"/memory/blocks/{block.pk}/").status_code == 404
    web.post(f"/memory/blocks/{block.pk}/edit", {"content": "pwned"})
    assert block_value(block=block) == ""
    assert web.get(f"/memory/agents/{stranger.pk}/context/").status_code == 404


def test_memory_pages_require_login(client, make_block):
    block = make_block()
    assert client.get(f"/memory/blocks/{block.pk}/").status_code == 302


def test_a_refused_new_block_comes_back_on_the_agent_page_with_its_input(
    web, make_block, agent
):
    make_block(label="persona")
    agent_page = f"/agents/{agent.pk}/"
    response = web.post(
        f"/memory/agents/{agent.pk}/blocks/new",
        {
            "form": "create-block",
            "label": "persona",
            "template": "human",
            "permission": "partner",
            "pinned": "on",
            "next": agent_page,
        },
        follow=True,
    )
    page = response.content.decode()
    assert response.redirect_chain[-1][0] == agent_page
    assert (
        'data-testid="field-error">this agent already has a block labelled '
        "&#x27;persona&#x27;" in page
    )
    assert 'value="persona"' in page and '<option value="human" selected>' in page
    assert '<option value="partner" selected>' in page
    assert 'name="pinned" checked' in page
    assert MemoryBlock.objects.filter(label="persona").count() == 1


def test_a_structured_form_changes_only_the_fields_it_posts(web, make_block, agent):
    block = make_block(label="human", template="human")
    url = f"/memory/blocks/{block.pk}/edit"
    web.post(
        url,
        {
            "f:name": "Sam",
            "l:preferences": "1",
            "i:preferences": ["a"],
            "i:preferences#a": "tea",
        },
    )
    # Meanwhile an agent sets the context; this page posts only its change.
    block_operate(
        actor=Actor.for_agent(agent),
        block=block,
        operations=[{"op": "set_field", "field": "context", "value": "at work"}],
    )
    web.post(url, {"f:name": "Robin"})
    assert block_value(block=block) == {
        "name": "Robin",
        "preferences": ["tea"],
        "context": "at work",
    }
    web.post(url, {"l:preferences": "1"})  # every item removed
    assert block_value(block=block)["preferences"] == []
    page = web.post(url, {}, follow=True).content.decode()
    assert "Nothing changed." in page


def _since(html, testid):
    marker = f'data-testid="{testid}"'
    if marker not in html:
        return None
    part = html[html.index(marker) :]
    return " ".join(part[: part.index("</section>")].split())


def test_the_block_page_shows_what_others_changed_since_the_last_look(
    web, make_block, agent
):
    block = make_block(label="notes", content="one")
    url = f"/memory/blocks/{block.pk}/"
    assert _since(web.get(url).content.decode(), "since-look") is None  # first look
    agent_actor = Actor.for_agent(agent)
    block_operate(
        actor=agent_actor,
        block=block,
        operations=[{"op": "append_text", "text": " two"}],
        summary="added two",
    )
    web.post(f"/memory/blocks/{block.pk}/edit", {"content": "one two three"})
    block_operate(
        actor=agent_actor,
        block=block,
        operations=[{"op": "append_text", "text": " four"}],
        summary="added four",
    )

    since = _since(web.get(url).content.decode(), "since-look")

    assert since is not None
    assert since.count(f"<strong>{agent.name}</strong>") == 2
    assert "added two" in since and "added four" in since
    assert "partner" not in since  # the person's own edit is not news to them
    assert "?from=1#compare" in since  # compare from the version last seen
    # Looking counts: the next visit has nothing new.
    assert _since(web.get(url).content.decode(), "since-look") is None


def test_the_constellation_page_shows_what_changed_since_the_last_visit(
    web, make_block, agent, constellation
):
    block = make_block(label="journal", content="day one")
    home = f"/constellations/{constellation.pk}/"
    assert web.get(home).status_code == 200
    assert _since(web.get(home).content.decode(), "since-visit") is None
    block_operate(
        actor=Actor.for_agent(agent),
        block=block,
        operations=[{"op": "append_text", "text": " day two"}],
    )

    since = _since(web.get(home).content.decode(), "since-visit")

    assert since is not None
    assert f"{agent.name}'s journal" in since
    assert f"1 change by {agent.name}" in since
    assert _since(web.get(home).content.decode(), "since-visit") is None


def test_the_home_page_counts_the_changed_blocks_of_each_constellation(
    web, make_block, agent, constellation, partner
):
    ConstellationFactory(partner=partner, name="Second")  # the home lists both
    block = make_block(label="journal", content="day one")
    web.get(f"/constellations/{constellation.pk}/")  # the visit since which
    block_operate(
        actor=Actor.for_agent(agent),
        block=block,
        operations=[{"op": "append_text", "text": " day two"}],
    )

    home = web.get("/").content.decode()

    assert home.count('data-testid="since-visit-count"') == 1
    assert "1 block</strong> changed since you last looked" in home
