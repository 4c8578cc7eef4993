"""Dashboard pages of the memory app."""

from django.urls import path  # noqa: F401

app_name = "memory"

urlpatterns: list = []
