"""Every script a page loads is an esbuild bundle of a page script."""

import re

from tests.conftest import JS_SOURCES, REPO

SCRIPT = re.compile(r"<script\b[^>]*\bsrc=\"\{% static '([^']+)' %\}\"")


def test_every_script_tag_loads_a_bundle_built_from_a_page_script():
    loaded = {
        source
        for template in (REPO / "templates").rglob("*.html")
        for source in SCRIPT.findall(template.read_text())
    }
    assert loaded, "no script tags found: the pattern no longer matches"
    for source in loaded:
        assert source.startswith("dist/"), f"{source} is served unbundled"
        assert (JS_SOURCES / "src" / source.removeprefix("dist/")).is_file()


def test_no_script_is_left_outside_the_bundled_sources():
    stray = [path.name for path in JS_SOURCES.glob("*.js")]
    assert stray == []
