from django.urls import path

from coordination.groups import views

app_name = "groups"

urlpatterns = [
    path(
        "constellations/<int:constellation_id>/",
        views.group_list_page,
        name="list",
    ),
    path("<int:group_id>/", views.group_page, name="group"),
    path("<int:group_id>/configure/", views.configure_group, name="configure"),
    path("<int:group_id>/members/", views.add_member, name="add_member"),
    path(
        "<int:group_id>/members/<int:agent_id>/remove/",
        views.remove_member,
        name="remove_member",
    ),
    path("<int:group_id>/messages/", views.route_group_message, name="route"),
    path("runs/<int:run_id>/", views.run_page, name="run"),
    path(
        "runs/<int:run_id>/conversation/",
        views.run_conversation_fragment,
        name="run_conversation",
    ),
    path(
        "constellations/<int:constellation_id>/agents/new/",
        views.agent_create_page,
        name="agent_new",
    ),
    path("agents/<int:agent_id>/chat/", views.agent_chat_send, name="agent_chat"),
    path(
        "agents/<int:agent_id>/tool-rules/",
        views.agent_tool_rules_save,
        name="agent_tool_rules",
    ),
]
