"""``manage.py group``: list, create, add-member, status, TOML round trip."""

import tomllib
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from coordination.groups.models import AgentGroup
from coordination.groups.selectors import group_export
from tests.coordination.groups.conftest import config_ids

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("group", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_create_add_member_list_and_status(agents, tmp_path):
    config = tmp_path / "rr.toml"
    config.write_text("skip_unavailable = false\n")
    run(
        "create", "Crisis Response", "--pattern", "round_robin", "--config", str(config)
    )
    run("add-member", "Crisis Response", "Momentum")
    run(
        "add-member",
        "Crisis Response",
        "Flux",
        "--role",
        "specialist",
        "--domain",
        "time",
        "--capability",
        "schedules",
    )
    assert run("list").strip() == (
        "Crisis Response\tround_robin\tMomentum (regular), Flux (specialist)"
    )
    status = run("status", "Crisis Response")
    assert "Flux: specialist [time]" in status
    assert "skip_unavailable = false" in status


def test_a_specialist_without_domain_is_a_command_error(agents):
    run("create", "Planning", "--pattern", "dynamic")
    with pytest.raises(CommandError, match="a specialist needs a domain"):
        run("add-member", "Planning", "Flux", "--role", "specialist")


def test_export_and_import_round_trip_through_toml(make_group, agents, tmp_path):
    original = make_group(
        "pipeline",
        [
            ("Entropy", "regular", {"capabilities": ["breakdown"]}),
            ("Flux", "specialist", {"domain": "time"}),
        ],
        {
            "stages": [
                {"name": "analysis", "agent_ids": [agents["Entropy"].pk]},
                {
                    "name": "scheduling",
                    "agent_ids": [agents["Flux"].pk],
                    "on_failure": "retry",
                    "max_attempts": 3,
                    "timeout": 90,
                },
            ]
        },
        name="Planning",
    )
    path = tmp_path / "planning.toml"
    run("export", "Planning", "-o", str(path))
    document = tomllib.loads(path.read_text())
    assert document["config"]["stages"][1]["agents"] == ["Flux"]
    assert document["members"][1] == {
        "agent": "Flux",
        "role": "specialist",
        "domain": "time",
        "capabilities": [],
    }
    before = group_export(group=original)
    with pytest.raises(CommandError, match="import with replace"):
        run("import", str(path))
    run("import", str(path), "--replace")
    imported = AgentGroup.objects.get(name="Planning")
    assert imported.pk != original.pk
    assert group_export(group=imported) == before
    assert imported.config == original.config


def test_import_refuses_an_unknown_agent_and_stores_nothing(agents, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(
        '[group]\nname = "Planning"\npattern = "supervisor"\n'
        '[config]\nleader = "Nobody"\n'
        '[[members]]\nagent = "Flux"\nrole = "regular"\n'
    )
    with pytest.raises(CommandError, match="no agent named 'Nobody'"):
        run("import", str(path))
    assert not AgentGroup.objects.exists()


def test_supervisor_leader_is_exported_by_name(make_group, agents):
    make_group(
        "supervisor",
        [("Entropy", "supervisor"), ("Flux", "regular")],
        config_ids(agents, leader_id="Entropy"),
        name="Planning",
    )
    document = tomllib.loads(run("export", "Planning"))
    assert document["config"]["leader"] == "Entropy"
    assert "leader_id" not in document["config"]
