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
    path("tasks/<int:task_id>/", views.task_page, name="task"),
    path("tasks/<int:task_id>/edit/", views.edit_task, name="task_edit"),
    path("tasks/<int:task_id>/status/", views.set_task_status, name="task_status"),
    path("tasks/<int:task_id>/assign/", views.assign_task, name="task_assign"),
    path(
        "tasks/<int:task_id>/dependencies/",
        views.add_task_dependency,
        name="task_dependency_add",
    ),
    path(
        "tasks/<int:task_id>/dependencies/<int:depends_on_id>/remove/",
        views.remove_task_dependency,
        name="task_dependency_remove",
    ),
    path("tasks/<int:task_id>/card/", views.task_card_fragment, name="task_card"),
    path(
        "constellations/<int:constellation_id>/handoffs/",
        views.handoff_inbox_page,
        name="handoffs",
    ),
    path("handoffs/<int:handoff_id>/read/", views.read_handoff, name="handoff_read"),
]
