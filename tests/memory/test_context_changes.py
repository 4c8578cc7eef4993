"""The context's <changes_since_last_look> section (memory.context)."""

from memory.blocks.schemas import ChangesIn
from memory.blocks.services import block_append, block_create, block_share
from memory.blocks.tools import block_changes_tool
from memory.context import changes_since_render, context_build
from pattern_site.kernel.actors import Actor

SYSTEM = Actor(kind="system")


def _text_block(label, **kwargs):
    return block_create(
        actor=SYSTEM, label=label, template="custom", schema={"kind": "text"}, **kwargs
    )


def test_section_lists_others_changes_to_shared_blocks_newest_first_per_author(
    agent, other_agent, constellation, partner
):
    shared = _text_block("plan", owner=other_agent)
    block_share(actor=SYSTEM, block=shared, agent=agent, access="read_write")
    org = _text_block("org", constellation=constellation)
    own = _text_block("mine", owner=agent)
    block_changes_tool(actor=Actor.for_agent(agent), args=ChangesIn())
    flux, entropy = Actor.for_agent(other_agent), Actor.for_agent(agent)
    block_append(actor=flux, block=shared, content="one")
    block_append(actor=flux, block=shared, content="two")
    block_append(actor=entropy, block=shared, content="mine too")
    block_append(actor=Actor.for_user(partner), block=org, content="policy")
    block_append(actor=Actor.for_user(partner), block=own, content="in your block")

    section = changes_since_render(agent)

    lines = section.splitlines()
    assert lines[0] == "<changes_since_last_look>"
    assert lines[-1] == "</changes_since_last_look>"
    body = lines[2:-1]
    assert len(body) == 2
    assert body[0].startswith("- org: partner (human), 1 change, latest ")
    assert body[0].endswith(": append: policy")
    assert body[1].startswith("- plan: Flux (agent), 2 changes, latest ")
    assert body[1].endswith(": append: two")
    assert section in context_build(agent=agent).system_prompt


def test_section_keeps_to_its_token_budget_and_is_empty_when_nothing_changed(
    agent, other_agent, constellation, settings
):
    blocks = [_text_block(f"b{n}", constellation=constellation) for n in range(6)]
    block_changes_tool(actor=Actor.for_agent(agent), args=ChangesIn())
    assert changes_since_render(agent) == ""
    for block in blocks:
        block_append(actor=Actor.for_agent(other_agent), block=block, content="x")
    settings.MEMORY_CHANGES_CONTEXT_TOKENS = 80

    section = changes_since_render(agent)

    assert "more not shown)" in section
    assert 0 < section.count("Flux (agent)") < 6
