"""The constellation_export and constellation_import commands."""

import io

import pytest
from django.core.management import CommandError, call_command

from pattern_site.kernel.agents.models import Constellation
from tests.pattern_site.backup.test_services import site_empty


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_export_then_import_on_an_empty_site_says_how_to_issue_tokens(
    rich_constellation, tmp_path
):
    path = tmp_path / "pattern.zip"
    assert "agent tokens are not exported" in run(
        "constellation_export", "Pattern", str(path)
    )
    assert not (tmp_path / "pattern.zip.partial").exists()
    site_empty()

    said = run("constellation_import", str(path))

    assert "Imported 'Pattern'" in said
    assert "agents: Helper, Lead" in said
    assert "rotate_agent_token 'Pattern' AGENT" in said
    assert "created without a password" in said and "member" in said
    assert Constellation.objects.get().agents.count() == 3


def test_import_of_a_taken_name_fails_clearly_and_rename_succeeds(
    rich_constellation, tmp_path
):
    path = tmp_path / "pattern.zip"
    run("constellation_export", "Pattern", str(path), "--no-vectors")
    with pytest.raises(CommandError, match="already exists here"):
        run("constellation_import", str(path))
    assert "Imported 'Copy'" in run(
        "constellation_import", str(path), "--rename", "Copy"
    )


def test_exporting_an_unknown_constellation_fails(db, tmp_path):
    with pytest.raises(CommandError, match="no constellation is named 'Nope'"):
        run("constellation_export", "Nope", str(tmp_path / "x.zip"))
    assert not (tmp_path / "x.zip").exists()
