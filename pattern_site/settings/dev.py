"""Local development: the embedded default, with DEBUG on unless turned off."""

from pattern_site.settings.base import *  # noqa: F403
from pattern_site.settings.base import env

DEBUG = env.bool("PATTERN_DEBUG", default=True)
