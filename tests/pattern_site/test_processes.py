from typing import Any

from pattern_site.processes import worker_embedding_threads


def test_worker_processes_share_the_cores_for_embedding(monkeypatch: Any):
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    assert worker_embedding_threads(concurrency=2, configured=0) == 1
    assert worker_embedding_threads(concurrency=1, configured=0) == 2
    assert worker_embedding_threads(concurrency=4, configured=0) == 1


def test_configured_embedding_threads_win(monkeypatch: Any):
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    assert worker_embedding_threads(concurrency=2, configured=3) == 3
