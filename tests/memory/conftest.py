"""Fixtures of the memory tests: blocks made through the services; the npm
toolchain and the browser bundle of the co-editor."""

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coordination.actors import Actor
from memory.services import block_create
from tests.conftest import REPO, missing, subprocess_env
from tests.factories import AgentFactory

NODE_MODULES = REPO / "node_modules"
DIST = REPO / "static" / "dist"


@pytest.fixture
def system() -> Actor:
    return Actor.system()


@pytest.fixture
def other_agent(constellation: Any) -> Any:
    return AgentFactory(constellation=constellation, name="Flux")


@pytest.fixture
def make_block(agent: Any) -> Any:
    """Create a block (owned by ``agent`` unless told) as the system."""

    def make(label: str = "notes", **kwargs: Any) -> Any:
        kwargs.setdefault("owner", agent)
        return block_create(actor=Actor.system(), label=label, **kwargs)

    return make


@pytest.fixture(scope="session")
def node() -> str:
    """Node with the committed npm packages installed (`make assets`)."""
    node = shutil.which("node")
    if node is None:
        missing("node is not installed")
    if not (NODE_MODULES / "loro-websocket").is_dir():
        missing("node_modules is missing: run `make assets` (npm ci)")
    return node


@pytest.fixture(scope="session")
def built_assets(node: str) -> Path:
    """static/dist/ with the editor bundle and the Loro wasm, built if absent."""
    if (
        not (DIST / "block_editor.js").exists()
        or not (DIST / "loro_wasm_bg.wasm").exists()
    ):
        subprocess.run([node, "static/js/build.mjs"], cwd=REPO, check=True)
    return DIST


def run_in_another_process(script: str) -> str:
    """Run Python ``script`` in a new process on the test database (Django
    set up first); its stdout."""
    out = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()\n" + script],
        cwd=REPO,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout
