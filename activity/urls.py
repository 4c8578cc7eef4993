from django.urls import path

from activity import views

app_name = "activity"

urlpatterns = [
    path(
        "constellations/<int:constellation_id>/",
        views.activity_feed_page,
        name="feed",
    ),
    path(
        "constellations/<int:constellation_id>/notable/",
        views.flag_notable_form,
        name="flag_notable",
    ),
    path(
        "agents/<int:agent_id>/catch-up/", views.catch_up_preview_page, name="catch_up"
    ),
]
