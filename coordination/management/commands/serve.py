"""Run the whole site: Daphne (HTTP + websockets) and a Celery worker with beat.

One command for a working installation: if any process dies, the others are
stopped and the command exits non-zero; Ctrl-C stops all of them.
"""

import os
import signal
import subprocess
import time
from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from pattern_site.processes import (
    celery_worker_command,
    daphne_command,
    worker_embedding_threads,
)


class Command(BaseCommand):
    help = "Start Daphne and a Celery worker (with embedded beat) side by side."

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
        commands = {
            "web": daphne_command(host=options["host"], port=options["port"]),
            "worker": celery_worker_command(
                "--beat",
                "--loglevel",
                "INFO",
                "--concurrency",
                str(options["concurrency"]),
            ),
        }
        threads = worker_embedding_threads(
            concurrency=options["concurrency"], configured=settings.EMBEDDING_THREADS
        )
        envs = {
            "web": None,
            "worker": {**os.environ, "PATTERN_EMBEDDING_THREADS": str(threads)},
        }
        procs = {
            name: subprocess.Popen(cmd, env=envs[name])
            for name, cmd in commands.items()
        }
        self.stdout.write(
            f"Serving on http://{options['host']}:{options['port']}/ (Ctrl-C to stop)"
        )

        def stop(*_: Any) -> None:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.terminate()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        try:
            while all(proc.poll() is None for proc in procs.values()):
                time.sleep(0.5)
        finally:
            stop()
            for proc in procs.values():
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
        failed = [n for n, p in procs.items() if p.returncode not in (0, -15, None)]
        if failed:
            raise SystemExit(f"stopped because {', '.join(failed)} exited")
