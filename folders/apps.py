from django.apps import AppConfig


class FoldersConfig(AppConfig):
    name = "folders"
    verbose_name = "Folders"

    def ready(self) -> None:
        # Folders sit above memory: the search engine and the embedding
        # pipeline learn of file passages here, where this app registers.
        from folders.files.index import FILE_PASSAGE_INDEX, FILE_PASSAGE_KIND
        from folders.files.models import FilePassage
        from folders.files.services import passages_embedded
        from folders.tools import agent  # noqa: F401  (registers the file tools)
        from folders.tools.search import file_hit_payload, files_domain_search
        from folders.tools.windows import files_render_for_agent
        from memory.context import context_section_register
        from memory.longterm.domains import search_domain_register
        from memory.search.registry import search_table_register

        search_table_register(
            kind=FILE_PASSAGE_KIND,
            model=FilePassage,
            index=FILE_PASSAGE_INDEX,
            on_embedded=passages_embedded,
        )
        # The windows of the files an agent holds open, after its handoffs.
        context_section_register(name="files", render=files_render_for_agent, order=20)
        # The search tool's ``files`` domain (and its ``all``).
        search_domain_register(
            name="files",
            kind="file",
            search=files_domain_search,
            payload=file_hit_payload,
        )
