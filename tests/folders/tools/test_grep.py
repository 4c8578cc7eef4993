import time

import pytest

from folders.tools.grep import folder_grep
from pattern_site.kernel.errors import InvalidInput

pytestmark = pytest.mark.django_db


@pytest.fixture
def files(folder, upload):
    upload(
        folder,
        ("a.py", b"import os\ndef main():\n    return os.getcwd()\n"),
        ("docs/b.md", b"# Title\nMain ideas\nnothing else\n"),
    )
    return folder


def test_grep_finds_lines_with_context(files):
    result = folder_grep(folder=files, pattern=r"def \w+", context=1)
    [match] = result.matches
    assert (match.path, match.line, match.text) == ("a.py", 2, "def main():")
    assert match.before == ["import os"]
    assert match.after == ["    return os.getcwd()"]


def test_grep_ignores_case_on_request(files):
    exact = folder_grep(folder=files, pattern="main", literal=True)
    folded = folder_grep(folder=files, pattern="main", ignore_case=True)
    assert [m.path for m in exact.matches] == ["a.py"]
    assert [(m.path, m.line) for m in folded.matches] == [("a.py", 2), ("docs/b.md", 2)]


def test_grep_one_file_and_glob(files):
    assert folder_grep(folder=files, pattern="i", path="docs/b.md").files_searched == 1
    result = folder_grep(folder=files, pattern="o", include="docs/*")
    qualified = folder_grep(
        folder=files, pattern="o", include="docs/a*", qualified=True
    )
    assert {m.path for m in qualified.matches} == {"a.py"}
    assert {m.path for m in result.matches} == {"docs/b.md"}


def test_grep_caps_results(files):
    result = folder_grep(folder=files, pattern=".", limit=2)
    assert len(result.matches) == 2 and result.truncated


def test_catastrophic_pattern_fails_within_a_second(folder, upload):
    upload(folder, ("evil.txt", ("a" * 5000 + "!\n").encode()))
    # CPU time, not wall time: the pattern must stop burning the worker
    # within a second however loaded the machine running the test is.
    started = time.process_time()
    with pytest.raises(InvalidInput, match="grep budget"):
        folder_grep(folder=folder, pattern=r"(a|aa)+$")
    assert time.process_time() - started < 1.0


def test_invalid_pattern_is_a_clear_error(files):
    with pytest.raises(InvalidInput, match="not a valid regular expression"):
        folder_grep(folder=files, pattern="(unclosed")


def test_grep_sees_a_changed_file_not_its_cached_text(files, human):
    from folders.files import services

    assert folder_grep(folder=files, pattern="getcwd", literal=True).matches
    services.file_write(
        actor=human, folder=files, path="a.py", text="import os\nos.listdir()\n"
    )
    assert not folder_grep(folder=files, pattern="getcwd", literal=True).matches
    assert folder_grep(folder=files, pattern="listdir", literal=True).matches
