"""Cutting a file's text into passages of whole lines.

A passage holds consecutive lines up to a token budget (estimated at four
characters a token, the model's wordpiece average on English and code), and
starts with the last few lines of the previous one so a sentence spanning
the cut is found from both sides.  A line is never split: one longer than
the budget is a passage of its own.  Line numbers are 1-based and
inclusive, so a hit cites ``path:start-end``.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Chunk:
    start_line: int
    end_line: int
    content: str


def estimate_tokens(line: str) -> int:
    return len(line) // 4 + 1


def chunk_lines(text: str, *, budget: int, overlap: int) -> list[Chunk]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    chunks: list[Chunk] = []
    start = 0
    n = len(lines)
    while start < n:
        end = start
        used = 0
        while end < n:
            cost = estimate_tokens(lines[end])
            if end > start and used + cost > budget:
                break
            used += cost
            end += 1
        content = "\n".join(lines[start:end])
        if content.strip():
            chunks.append(Chunk(start + 1, end, content))
        if end >= n:
            break
        # Step back by the overlap, but always move forward.
        start = max(end - overlap, start + 1)
    return chunks
