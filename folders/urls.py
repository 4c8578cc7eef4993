"""Dashboard pages of the folders app."""

from django.urls import path

from folders import views

app_name = "folders"

urlpatterns = [
    path("", views.folder_list_page, name="list"),
    path("new", views.create_folder, name="create"),
    path("<int:folder_id>/", views.folder_page, name="folder"),
    path("<int:folder_id>/delete", views.delete_folder, name="delete"),
    path("<int:folder_id>/rescan", views.rescan_folder, name="rescan"),
    path("<int:folder_id>/attach", views.attach_folder, name="attach"),
    path("<int:folder_id>/detach/<int:agent_id>", views.detach_folder, name="detach"),
    path("<int:folder_id>/files/<int:file_id>/", views.file_page, name="file"),
    path(
        "<int:folder_id>/files/<int:file_id>/delete",
        views.delete_file,
        name="file_delete",
    ),
]
