from django.apps import AppConfig


class FoldersConfig(AppConfig):
    name = "folders"
    verbose_name = "Folders"

    def ready(self) -> None:
        # Folders sit above memory: memory's embedding pipeline learns of
        # file passages here, the one place this app registers with it.
        from folders.files.index import FILE_PASSAGE_INDEX, FILE_PASSAGE_KIND
        from folders.files.models import FilePassage
        from folders.files.services import passages_embedded
        from memory.indexes import EMBEDDED_HOOKS, INDEXED

        INDEXED[FILE_PASSAGE_KIND] = (FilePassage, FILE_PASSAGE_INDEX)
        EMBEDDED_HOOKS[FILE_PASSAGE_KIND] = passages_embedded
