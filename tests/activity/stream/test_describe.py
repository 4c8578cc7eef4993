import pytest

from activity.stream.describe import SYSTEM, event_line
from activity.stream.models import EventType


@pytest.mark.parametrize(
    ("who", "subject", "details", "line"),
    [
        (
            SYSTEM,
            "Flux",
            {"label": "notes", "change_type": "create"},
            "System created Flux's notes block",
        ),
        (
            "partner",
            "Flux",
            {"label": "human", "change_type": "append"},
            "partner updated Flux's human block (append)",
        ),
        (
            "Flux",
            "Flux",
            {"label": "notes", "change_type": "replace"},
            "Flux updated the notes block (replace)",
        ),
    ],
)
def test_a_block_event_says_whose_block_it_is(who, subject, details, line):
    assert (
        event_line(
            who=who,
            subject=subject,
            event_type=EventType.MEMORY_BLOCK_UPDATED,
            details=details,
        )
        == line
    )


def test_a_file_event_names_the_file_as_cited_without_a_made_up_folder():
    line = event_line(
        who="Pattern",
        subject="Pattern",
        event_type=EventType.FILE_ACCESSED,
        details={"path": "Trip docs/packing.txt", "lines": "1-40", "how": "open"},
    )
    assert line == "Pattern opened Trip docs/packing.txt (lines 1-40)"
