from django.urls import path

from coordination.work import views

app_name = "work"

urlpatterns = [
    path(
        "constellations/<int:constellation_id>/tasks/",
        views.task_board_page,
        name="board",
    ),
    path(
        "constellations/<int:constellation_id>/tasks/new/",
        views.create_task,
        name="task_create",
    ),
    path("tasks/<int:task_id>/card/", views.task_card_fragment, name="task_card"),
    path(
        "constellations/<int:constellation_id>/handoffs/",
        views.handoff_inbox_page,
        name="handoffs",
    ),
    path("handoffs/<int:handoff_id>/read/", views.read_handoff, name="handoff_read"),
]
