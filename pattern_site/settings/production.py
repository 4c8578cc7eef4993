"""Production: secrets and hosts must come from the environment."""

from pattern_site.settings.base import *  # noqa: F403
from pattern_site.settings.base import env

DEBUG = False
SECRET_KEY = env.str("PATTERN_SECRET_KEY")
SESSION_COOKIE_SECURE = env.bool("PATTERN_SECURE_COOKIES", default=True)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
