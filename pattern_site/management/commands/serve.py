"""Run the whole site: Daphne (HTTP + websockets), a Celery worker and beat.

One command for a working installation.  Each process is supervised
(``pattern_site.supervisor``): one that dies is restarted with a backoff and
a log line while the others keep serving; SIGTERM or Ctrl-C stops all of
them, with whatever processes they started.
"""

import os
import sys
import threading
from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from pattern_site.kernel.agents.selectors import demo_login_get
from pattern_site.processes import (
    celery_beat_command,
    celery_worker_command,
    daphne_command,
    wait_for_port,
    worker_embedding_threads,
)
from pattern_site.supervisor import Child, Supervisor


class Command(BaseCommand):
    help = "Start Daphne, a Celery worker and beat, and keep them running."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--host", default=os.environ.get("PATTERN_HOST", "127.0.0.1")
        )
        parser.add_argument(
            "--port", type=int, default=int(os.environ.get("PATTERN_PORT", "8000"))
        )
        parser.add_argument(
            "--concurrency",
            type=int,
            default=int(os.environ.get("PATTERN_WORKER_CONCURRENCY", "2")),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        threads = worker_embedding_threads(
            concurrency=options["concurrency"], configured=settings.EMBEDDING_THREADS
        )
        worker = celery_worker_command(
            "--loglevel", "INFO", "--concurrency", str(options["concurrency"])
        )
        beat = celery_beat_command(
            "--loglevel",
            "INFO",
            "--schedule",
            settings.CELERY_BEAT_SCHEDULE_FILENAME,
        )
        children = [
            Child("web", daphne_command(host=options["host"], port=options["port"])),
            Child(
                "worker",
                worker,
                env={**os.environ, "PATTERN_EMBEDDING_THREADS": str(threads)},
            ),
            Child("beat", beat),
        ]
        url = f"http://{options['host']}:{options['port']}/"
        self.stdout.write(f"Starting on {url} (Ctrl-C to stop)")

        def log(line: str) -> None:
            self.stdout.write(f"serve: {line}")
            sys.stdout.flush()

        # The banner comes once the web process listens, after the start-up
        # lines of all three processes, so it is the last thing a newcomer
        # reads before opening the page.
        threading.Thread(
            target=self._banner, args=(url, options["port"]), daemon=True
        ).start()
        Supervisor(children, log=log).run()

    def _banner(self, url: str, port: int) -> None:
        try:
            wait_for_port(port, timeout=600)
        except TimeoutError:
            return
        lines = [f"Pattern site is ready: {url}"]
        login = demo_login_get()
        if login is not None:
            lines.append(f"Log in as {login.username} / {login.password}")
            lines.append(f"(kept in {login.path})")
        width = max(len(line) for line in lines) + 4
        rule = "=" * width
        self.stdout.write(
            "\n".join(["", rule, *(f"  {line}" for line in lines), rule, ""])
        )
        sys.stdout.flush()
