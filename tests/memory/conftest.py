"""Fixtures of the co-editing tests: the npm toolchain and the browser bundle."""

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, missing

NODE_MODULES = REPO / "node_modules"
DIST = REPO / "static" / "dist"


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
