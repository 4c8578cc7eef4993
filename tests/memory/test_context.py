"""The context builder: seed 004's order and format, budgets and metadata."""

from memory.blocks.services import block_create, block_share
from memory.context import (
    ToolRule,
    context_build,
    render_tool_rules,
)
from pattern_site.kernel.actors import Actor


def test_prompt_order_and_block_format(make_block, agent, other_agent, constellation):
    make_block(
        label="persona",
        content="I break tasks down",
        block_type="core",
        description="Who you are",
    )
    make_block(
        label="scratch",
        content="step 1",
        block_type="working",
        pinned=True,
        description="Notes",
    )
    make_block(label="ephemeral", content="thread", block_type="working")
    make_block(label="stored", content="old", block_type="archival")
    shared = make_block(
        label="shared_notes",
        owner=other_agent,
        block_type="core",
        content="insights",
        description="Cross-agent insights",
    )
    block_share(actor=Actor.system(), block=shared, agent=agent, access="append_only")

    built = context_build(
        agent=agent,
        base_instructions="You are Entropy.",
        tool_rules=[
            ToolRule("send_message", "exit_loop"),
            ToolRule("context", "start_constraint"),
        ],
    )

    assert built.system_prompt == (
        "You are Entropy.\n\n"
        '<block:persona permission="ReadWrite">\nWho you are\nI break tasks down\n'
        "</block:persona>\n\n"
        '<block:shared_notes permission="Append" shared_from="Flux">\n'
        "Cross-agent insights\ninsights\n</block:shared_notes>\n\n"
        '<block:scratch permission="ReadWrite">\nNotes\nstep 1\n</block:scratch>\n\n'
        "# Tool Execution Rules\n"
        "- Call `context` first before any other tools\n"
        "- The conversation will end after calling `send_message`"
    )
    assert [s.name for s in built.sections] == [
        "base_instructions",
        "core_memory",
        "working_memory",
        "handoffs",
        "changes_since_last_look",
        "files",
        "catch_up",
        "activity",
        "tool_rules",
    ]
    assert built.metadata["tokens_by_section"]["activity"] == 0


def test_batch_block_ids_bring_in_unpinned_working_blocks(make_block, agent):
    block = make_block(label="discord_thread_12345", content="thread", pinned=False)
    assert "discord_thread" not in context_build(agent=agent).system_prompt
    by_id = context_build(agent=agent, batch_block_ids=[str(block.pk)])
    by_label = context_build(agent=agent, batch_block_ids=["discord_thread_12345"])
    assert "<block:discord_thread_12345" in by_id.system_prompt
    assert by_id.system_prompt == by_label.system_prompt


def test_descriptions_can_be_left_out(make_block, agent):
    make_block(label="persona", content="me", block_type="core", description="DESC")
    assert (
        "DESC"
        not in context_build(agent=agent, include_descriptions=False).system_prompt
    )


def test_constellation_blocks_carry_attribution(constellation, agent):
    block_create(
        actor=Actor.system(),
        constellation=constellation,
        label="organization",
        template="organization",
        permission="read_only",
    )
    prompt = context_build(agent=agent).system_prompt
    assert (
        '<block:organization permission="ReadOnly" shared_from="constellation">'
        in prompt
    )
    assert "name [read-only]:" in prompt


def test_working_blocks_past_the_memory_budget_are_omitted_and_reported(
    make_block, agent
):
    agent.model_name = "llama-3-8b"  # 2,000 memory tokens
    make_block(label="a_pinned", content="word " * 1200, pinned=True, char_limit=10_000)
    make_block(label="b_pinned", content="word " * 1200, pinned=True, char_limit=10_000)
    built = context_build(agent=agent)
    assert built.metadata["limits"]["memory_tokens"] == 2000
    assert built.metadata["omitted_blocks"] == ["b_pinned"]
    assert "<block:a_pinned" in built.system_prompt
    assert built.metadata["memory_tokens"] <= 2000


def test_requires_prior_and_continue_rules_render():
    assert render_tool_rules(
        [
            ToolRule("search", "continue_loop"),
            ToolRule("send", "requires_prior", "search"),
        ]
    ) == (
        "# Tool Execution Rules\n"
        "- The conversation will be continued after calling `search`\n"
        "- Call `send` only after calling `search`"
    )
