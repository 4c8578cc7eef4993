"""Template filters every page uses (a builtin library: see TEMPLATES)."""

from datetime import datetime

from django import template
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

from pattern_site.kernel.humanize import ago_at

register = template.Library()
# CommonMark without raw HTML: text written by agents and models is shown as
# formatted text, never as markup of its own (links keep CommonMark's scheme
# check, so no javascript: URLs).
_MARKDOWN = MarkdownIt("commonmark", {"html": False})


@register.filter
def ago(moment: datetime | None) -> str:
    """``moment`` as people say it: "just now", "5 minutes ago", "never"."""
    return ago_at(moment, timezone.now())


@register.filter
def words(code: str) -> str:
    """A machine code as words: "not_found" reads "Not found"."""
    text = str(code).replace("_", " ").strip()
    return text[:1].upper() + text[1:]


@register.filter
def markdown(text: str) -> SafeString:
    """Markdown written by agents or models as HTML (their own HTML escaped)."""
    return mark_safe(_MARKDOWN.render(str(text or "")))


@register.filter
def name_in(ref: str, names: dict[str, str]) -> str:
    """``ref`` ("agent:3") as the name a view resolved for it."""
    return names.get(ref, ref) if isinstance(names, dict) else ref
