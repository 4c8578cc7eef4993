from django.urls import path

from pattern_site.backup import views

app_name = "backup"

urlpatterns = [
    path(
        "constellations/<int:constellation_id>/backup/",
        views.constellation_download,
        name="download",
    ),
    path("constellations/import/", views.constellation_upload, name="upload"),
]
