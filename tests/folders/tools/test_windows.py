import pytest

from folders.models import OpenFile
from folders.tools import windows

pytestmark = pytest.mark.django_db


def _numbered(n: int) -> bytes:
    return "".join(f"row {i}\n" for i in range(1, n + 1)).encode()


def test_window_pages_forward_and_stops_at_the_last_lines(folder, upload, writer):
    [change] = upload(folder, ("rows.txt", _numbered(250)))
    first = windows.file_open(agent=writer, file=change.file, lines=100)
    assert (first.start_line, first.end_line, first.total_lines) == (1, 100, 250)
    second = windows.file_page(agent=writer, file=change.file, forward=True)
    assert (second.start_line, second.end_line) == (101, 200)
    third = windows.file_page(agent=writer, file=change.file, forward=True)
    assert (third.start_line, third.end_line) == (151, 250)
    assert third.content.split("\n")[-1] == "row 250"
    again = windows.file_page(agent=writer, file=change.file, forward=True)
    assert (again.start_line, again.end_line) == (151, 250)


def test_window_pages_back_and_stops_at_line_one(folder, upload, writer):
    [change] = upload(folder, ("rows.txt", _numbered(250)))
    windows.file_open(agent=writer, file=change.file, line=30, lines=50)
    back = windows.file_page(agent=writer, file=change.file, forward=False)
    assert (back.start_line, back.end_line) == (1, 50)
    assert back.content.split("\n")[0] == "row 1"


def test_window_of_a_short_file_shows_all_of_it(folder, upload, writer):
    [change] = upload(folder, ("short.txt", _numbered(3)))
    window = windows.file_open(agent=writer, file=change.file, line=50)
    assert (window.start_line, window.end_line, window.total_lines) == (1, 3, 3)


def test_opening_past_the_limit_closes_the_least_recently_used(
    folder, upload, writer, settings
):
    settings.FOLDER_MAX_OPEN_FILES = 2
    files = [c.file for c in upload(folder, *[(f"{n}.txt", b"x\n") for n in "abc"])]
    a, b, c = sorted(files, key=lambda f: f.path)
    windows.file_open(agent=writer, file=a)
    windows.file_open(agent=writer, file=b)
    windows.file_page(agent=writer, file=a, forward=True)  # a used after b
    opened = windows.file_open(agent=writer, file=c)
    assert opened.closed == ["b.txt"]
    assert set(
        OpenFile.objects.filter(agent=writer).values_list("file__path", flat=True)
    ) == {"a.txt", "c.txt"}


def test_render_shows_open_files_with_line_numbers(folder, upload, writer):
    [change] = upload(folder, ("rows.txt", _numbered(12)))
    windows.file_open(agent=writer, file=change.file, line=10, lines=2)
    rendered = windows.files_render_for_agent(writer)
    assert rendered == (
        '<file path="docs/rows.txt" lines="10-11" of="12">\n'
        "10: row 10\n11: row 11\n</file>"
    )


def test_render_leaves_out_files_of_detached_folders(folder, upload, writer, human):
    from folders.files import services

    [change] = upload(folder, ("rows.txt", _numbered(5)))
    windows.file_open(agent=writer, file=change.file)
    services.folder_detach(actor=human, folder=folder, agent_id=writer.pk)
    assert windows.files_render_for_agent(writer) == ""


def test_an_open_file_is_in_the_built_context_and_its_reads_are_recorded(
    folder, upload, writer, django_capture_on_commit_callbacks
):
    from activity.stream.models import ActivityEvent, EventType
    from memory.context import context_build

    [change] = upload(folder, ("notes.md", _numbered(5)))
    with django_capture_on_commit_callbacks(execute=True):
        windows.file_open(agent=writer, file=change.file, lines=3)
    built = context_build(agent=writer)
    assert 'lines="1-3" of="5"' in built.system_prompt
    assert built.metadata["tokens_by_section"]["files"] > 0
    (event,) = ActivityEvent.objects.filter(event_type=EventType.FILE_ACCESSED)
    assert event.agent == writer
    assert event.details["path"].endswith("notes.md")
    assert event.details["lines"] == "1-3"
