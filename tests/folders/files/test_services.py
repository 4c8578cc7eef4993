import io
import itertools
import zipfile
from typing import Any

import pytest

from folders.files import services
from folders.files.index import FILE_PASSAGE_INDEX
from folders.models import FilePassage, FolderFile, IndexState
from memory.models import EmbeddingState
from memory.search.engine import fts_candidates
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import InvalidInput, LimitExceeded
from tests.folders.conftest import committed

pytestmark = pytest.mark.django_db


def _fts_ids(folder: Any, word: str) -> set[int]:
    return {
        row_id
        for row_id, _bm25, _snip in fts_candidates(
            FILE_PASSAGE_INDEX,
            query=f'"{word}"',
            scope_id=folder.constellation_id,
            owner_ids=[folder.pk],
            k=100,
        )
    }


def test_upload_indexes_passages_with_line_ranges_and_vectors(folder, upload):
    text = "".join(f"line {n} about gardening tomatoes\n" for n in range(1, 301))
    [change] = upload(folder, ("notes/garden.md", text.encode()))
    file = FolderFile.objects.get(pk=change.file.pk)
    assert change.status == "created"
    assert file.index_state == IndexState.READY
    assert file.line_count == 300
    passages = list(file.passages.order_by("position"))
    assert len(passages) > 1
    assert passages[0].start_line == 1
    assert passages[-1].end_line == 300
    # Consecutive passages overlap by a little and never skip a line.
    for before, after in itertools.pairwise(passages):
        assert before.end_line - 2 < after.start_line <= before.end_line + 1
    assert {p.embedding_state for p in passages} == {EmbeddingState.READY}
    assert file.embedded_count == file.passage_count == len(passages)
    assert _fts_ids(folder, "tomatoes") == {p.pk for p in passages}


def test_reupload_of_identical_content_is_a_no_op(folder, upload):
    [first] = upload(folder, ("a.txt", b"alpha beta\n"))
    before = list(FilePassage.objects.values_list("pk", "embedded_hash"))
    [again] = upload(folder, ("a.txt", b"alpha beta\n"))
    assert again.status == "unchanged"
    assert list(FilePassage.objects.values_list("pk", "embedded_hash")) == before
    assert FolderFile.objects.get().uploaded_at == first.file.uploaded_at


def test_changed_file_reembeds_only_its_new_passages(folder, upload, monkeypatch):
    paragraphs = [
        "\n".join(f"paragraph {p} sentence {s} " + "word " * 60 for s in range(4))
        for p in range(6)
    ]
    upload(folder, ("long.md", "\n".join(paragraphs).encode()))
    kept = {p.content_hash: p.pk for p in FilePassage.objects.all()}
    embedded: list[str] = []
    from memory.search import pipeline as embeddings

    real = embeddings.embed_texts
    monkeypatch.setattr(
        embeddings,
        "embed_texts",
        lambda texts: embedded.extend(texts) or real(texts),
    )
    paragraphs[-1] = paragraphs[-1].replace("paragraph 5", "changed ending")
    [change] = upload(folder, ("long.md", "\n".join(paragraphs).encode()))
    assert change.status == "updated"
    after = {p.content_hash: p.pk for p in FilePassage.objects.all()}
    survivors = set(kept) & set(after)
    assert survivors, "unchanged passages keep their rows"
    assert all(kept[h] == after[h] for h in survivors)
    assert 0 < len(embedded) < len(after)
    assert all("changed ending" in t for t in embedded)
    assert _fts_ids(folder, "changed") and not _fts_ids(folder, "paragraph 5")


def test_deleted_file_leaves_the_index(
    folder, upload, human, django_capture_on_commit_callbacks
):
    [change] = upload(folder, ("gone.txt", b"ephemeral words here\n"))
    assert _fts_ids(folder, "ephemeral")
    with committed(django_capture_on_commit_callbacks):
        services.file_delete(actor=human, file=change.file)
    assert not _fts_ids(folder, "ephemeral")
    assert not FilePassage.objects.exists()


def test_binary_upload_is_refused_and_nothing_is_stored(folder, upload):
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(100)
    with pytest.raises(InvalidInput, match=r"binary file .*accept text"):
        upload(folder, ("ok.txt", b"fine\n"), ("pic.png", png))
    assert not FolderFile.objects.exists()


def test_file_over_the_size_limit_is_refused(folder, upload, settings):
    settings.FOLDER_MAX_FILE_BYTES = 100
    with pytest.raises(LimitExceeded, match="at most 100"):
        upload(folder, ("big.txt", b"x" * 101))
    assert not FolderFile.objects.exists()


def test_folder_size_limit_counts_files_already_there(folder, upload, settings):
    settings.FOLDER_MAX_BYTES = 150
    upload(folder, ("a.txt", b"a" * 100))
    with pytest.raises(LimitExceeded, match="would hold 200 bytes"):
        upload(folder, ("b.txt", b"b" * 100))
    upload(folder, ("a.txt", b"c" * 140))  # replacing a file frees its bytes
    assert FolderFile.objects.get().size == 140


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../etc/passwd", "leaves its folder"),
        ("/etc/passwd", "is absolute"),
        ("a/../../b", "leaves its folder"),
        ("a\x00b", "NUL"),
        ("a\\b", "backslashes"),
        ("a\nb.md", "control character"),
        ("docs/", "names a directory"),
        ("/".join(["d"] * 32) + "/a.md", "33 levels deep; at most 32"),
        ("a" * 1100 + ".md", "1103 chars; at most 1024"),
    ],
)
def test_upload_paths_leaving_the_folder_are_refused(folder, upload, path, reason):
    with pytest.raises(InvalidInput, match=reason):
        upload(folder, ("fine.md", b"text\n"), (path, b"text\n"))
    assert not FolderFile.objects.exists()


def test_upload_keeps_a_tree_at_the_deepest_allowed_level(folder, upload):
    deep = "/".join(["d"] * 31) + "/a.md"
    changes = upload(folder, (deep, b"deep\n"), ("./x//y.md", b"y\n"))
    assert sorted(c.path for c in changes) == [deep, "x/y.md"]


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_zip_upload_expands_its_tree(folder, upload):
    data = _zip({"src/a.py": b"print('a')\n", "README.md": b"# Title\n"})
    changes = upload(folder, ("tree.zip", data))
    assert sorted(c.path for c in changes) == ["README.md", "src/a.py"]
    assert FolderFile.objects.get(path="src/a.py").content_type == "text/x-python"


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        ("../../outside.txt", "leaves its folder"),
        ("/".join(["d"] * 40) + "/a.md", "levels deep"),
    ],
)
def test_zip_with_a_bad_member_path_is_refused(folder, upload, member, reason):
    with pytest.raises(InvalidInput, match=reason):
        upload(folder, ("evil.zip", _zip({"ok.md": b"x\n", member: b"x\n"})))
    assert not FolderFile.objects.exists()


def test_zip_bomb_stops_at_the_inflation_limit(folder, upload, settings):
    settings.FOLDER_ZIP_MAX_RATIO = 50
    bomb = _zip({"bomb.txt": b"0" * 5_000_000})
    assert len(bomb) < 20_000
    with pytest.raises(LimitExceeded, match="inflates past"):
        upload(folder, ("bomb.zip", bomb))
    assert not FolderFile.objects.exists()


def test_pdf_text_is_extracted(folder, upload):
    from pypdf import PdfWriter
    from pypdf.generic import (
        DecodedStreamObject,
        DictionaryObject,
        NameObject,
    )

    writer = PdfWriter()
    page = writer.add_blank_page(width=300, height=200)
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
    )
    stream = DecodedStreamObject()
    stream.set_data(b"BT /F1 12 Tf 20 100 Td (Quarterly invoice summary) Tj ET")
    page[NameObject("/Contents")] = writer._add_object(stream)
    buffer = io.BytesIO()
    writer.write(buffer)
    [change] = upload(folder, ("report.pdf", buffer.getvalue()))
    assert "Quarterly invoice summary" in FolderFile.objects.get().text
    assert change.file.content_type == "application/pdf"


def test_agents_cannot_create_folders(constellation, agent):
    from pattern_site.kernel.errors import PermissionDenied

    with pytest.raises(PermissionDenied, match="only the humans"):
        services.folder_create(
            actor=Actor.for_agent(agent), constellation_id=constellation.pk, name="x"
        )
