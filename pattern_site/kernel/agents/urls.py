from django.urls import path

from pattern_site.kernel.agents import views

app_name = "dashboard"

urlpatterns = [
    path("", views.home, name="home"),
    path(
        "constellations/<int:constellation_id>/",
        views.constellation_detail,
        name="constellation",
    ),
    path("agents/<int:agent_id>/", views.agent_detail, name="agent"),
    path(
        "agents/<int:agent_id>/model/",
        views.configure_agent_model,
        name="agent_model",
    ),
    path(
        "agents/<int:agent_id>/tokens/issue/",
        views.issue_agent_token,
        name="agent_token_issue",
    ),
    path(
        "agents/<int:agent_id>/tokens/revoke/",
        views.revoke_agent_tokens,
        name="agent_token_revoke",
    ),
]
