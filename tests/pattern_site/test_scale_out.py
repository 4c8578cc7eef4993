"""Scale-out on PostgreSQL: three Daphne processes and two Celery workers on
one Redis and one PostgreSQL; agents hitting different web processes
append to the same blocks, and every acknowledged write is there at the end.
"""

import json
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from memory.blocks.models import MemoryBlock, SharedAccess
from memory.blocks.selectors import block_value
from memory.blocks.services import block_create, block_share
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue
from pattern_site.processes import (
    SOLO_WORKER_OPTIONS,
    celery_worker_command,
    daphne_start,
    processes_stop,
)
from tests.conftest import READY_SECONDS, REPO, subprocess_env
from tests.factories import AgentFactory

pytestmark = [
    pytest.mark.slow,
    pytest.mark.pgvector,
    pytest.mark.django_db(transaction=True),
]

WEB_PROCESSES = 3
WORKERS = 2
AGENTS = 6
APPENDS_EACH = 15


@pytest.fixture
def cluster(transactional_db: None, redis_url: str) -> Iterator[list[str]]:
    """Base URLs of three Daphne processes; two workers run beside them."""
    env = subprocess_env(
        PATTERN_REDIS_URL=redis_url, PATTERN_CELERY_BROKER_URL=redis_url
    )
    procs: list[subprocess.Popen] = []
    urls = []
    try:
        for _ in range(WORKERS):
            procs.append(
                subprocess.Popen(
                    celery_worker_command(*SOLO_WORKER_OPTIONS),
                    cwd=REPO,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        for _ in range(WEB_PROCESSES):
            port, proc = daphne_start(cwd=REPO, env=env, timeout=READY_SECONDS)
            procs.append(proc)
            urls.append(f"http://127.0.0.1:{port}")
        yield urls
    finally:
        processes_stop(procs)


def _append(base: str, token: str, label: str, text: str) -> int:
    request = urllib.request.Request(
        f"{base}/api/tools/context",
        data=json.dumps(
            {"operation": "append", "label": label, "content": text}
        ).encode(),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def test_every_acknowledged_append_through_any_web_process_is_kept(
    cluster: list[str], constellation: Any
):
    agents = [
        AgentFactory(constellation=constellation, name=f"agent {i}")
        for i in range(AGENTS)
    ]
    # Two blocks, each written by half of the agents: its owner and the
    # agents it is shared with (append access).
    system = Actor.system()
    blocks = []
    for n in range(2):
        block = block_create(actor=system, label=f"shared{n}", owner=agents[n])
        for other in agents[n + 2 :: 2]:
            block_share(
                actor=system, block=block, agent=other, access=SharedAccess.APPEND_ONLY
            )
        blocks.append(block)
    tokens = [agent_token_issue(agent=a).raw for a in agents]
    acknowledged: list[tuple[str, str]] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        label = f"shared{i % 2}"
        for j in range(APPENDS_EACH):
            text = f"a{i}-{j}"
            base = cluster[(i + j) % len(cluster)]
            if _append(base, tokens[i], label, text) == 200:
                with lock:
                    acknowledged.append((label, text))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(AGENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert len(acknowledged) == AGENTS * APPENDS_EACH
    for block in blocks:
        value = block_value(block=MemoryBlock.objects.get(pk=block.pk))
        lines = set(value.splitlines())
        mine = {text for label, text in acknowledged if label == block.label}
        assert mine <= lines
