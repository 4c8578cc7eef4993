"""Template filters every page uses (a builtin library: see TEMPLATES)."""

from datetime import datetime

from django import template
from django.utils import timezone

from pattern_site.kernel.humanize import ago_at

register = template.Library()


@register.filter
def ago(moment: datetime | None) -> str:
    """``moment`` as people say it: "just now", "5 minutes ago", "never"."""
    return ago_at(moment, timezone.now())


@register.filter
def words(code: str) -> str:
    """A machine code as words: "not_found" reads "Not found"."""
    text = str(code).replace("_", " ").strip()
    return text[:1].upper() + text[1:]
