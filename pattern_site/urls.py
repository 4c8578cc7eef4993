from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from pattern_site.api import api
from pattern_site.kernel.agents.views import PartnerLoginView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("login/", PartnerLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("pattern_site.kernel.agents.urls")),
    path("", include("pattern_site.backup.urls")),
    path("", include("coordination.work.urls")),
    path("memory/", include("memory.urls")),
    path("activity/", include("activity.urls")),
    path("groups/", include("coordination.groups.urls")),
    path("folders/", include("folders.urls")),
]
