"""The admin covers every model of the project's apps, and each list renders."""

import pytest
from django.apps import apps
from django.contrib import admin
from django.test import Client
from django.urls import reverse

from tests.factories import UserFactory

# Rows that exist only as parts of another model's page.
PARTS = {
    "memory.BlockSnapshot",
    "memory.BlockSeen",
    "memory.BlockLook",
    "memory.BlockPeer",
    "memory.ScratchpadEntry",
    "memory.BlockUpdate",
    "memory.BlockAttachment",
    "coordination.GroupMembership",
    "coordination.RunDelivery",
    "coordination.GroupRunEvent",
    "activity.ActivityTerm",
    "activity.ActivityHourCount",
    "folders.FolderFile",
    "folders.FilePassage",
    "folders.OpenFile",
    "coordination.AgentToolCall",
}
APPS = ("coordination", "memory", "activity", "folders")


def test_every_model_is_in_the_admin_or_shown_with_its_owner():
    missing = [
        m._meta.label
        for m in apps.get_models()
        if m._meta.app_label in APPS
        and m not in admin.site._registry
        and m._meta.label not in PARTS
    ]
    assert missing == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    "model",
    [m for m in admin.site._registry if m._meta.app_label in APPS],
    ids=lambda m: m._meta.label,
)
def test_each_admin_list_renders(model):
    client = Client()
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    assert client.get(url).status_code == 200


def test_the_admin_names_every_model_in_good_english():
    # Django adds an "s": "archival entrys" unless the model says otherwise.
    naive = [
        m._meta.verbose_name_plural
        for m in apps.get_models()
        if m._meta.app_label in APPS
        and str(m._meta.verbose_name).endswith("y")
        and str(m._meta.verbose_name_plural).endswith("ys")
    ]
    assert naive == []
