"""Coalesce concurrent searches into one encode + search call.

Sixteen clients each sending one query would otherwise queue on the encoder one at a time; one batch of sixteen
costs little more than one query. No artificial wait: requests that arrive while a batch runs form the next one.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from retrieval.searcher import Searcher
from scoring.observations import RetrievedDocument


@dataclass(slots=True)
class _Job:
    queries: Sequence[str]
    topk: int
    done: threading.Event = field(default_factory=threading.Event)
    result: list[list[RetrievedDocument]] | None = None
    error: BaseException | None = None


class BatchingSearcher:
    """A :class:`Searcher` that runs its wrapped searcher on one worker thread, many callers' queries at once.

    A batch is searched with the largest ``topk`` asked and each caller gets its own prefix of that ranking.
    """

    def __init__(self, searcher: Searcher, *, max_batch: int = 256) -> None:
        self.searcher = searcher
        self.max_batch = max_batch
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._worker = threading.Thread(target=self._run, name="retrieval-batcher", daemon=True)
        self._worker.start()

    def search(self, queries: Sequence[str], topk: int) -> list[list[RetrievedDocument]]:
        if not queries:
            return []
        job = _Job(list(queries), topk)
        self._jobs.put(job)
        job.done.wait()
        if job.error is not None:
            raise job.error
        assert job.result is not None
        return job.result

    def close(self) -> None:
        self._jobs.put(None)
        self._worker.join()

    def _take_batch(self, first: _Job) -> tuple[list[_Job], bool]:
        batch, size = [first], len(first.queries)
        while size < self.max_batch:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is None:
                return batch, True
            batch.append(job)
            size += len(job.queries)
        return batch, False

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._jobs.get()
            if first is None:
                return
            batch, stopping = self._take_batch(first)
            queries = [q for job in batch for q in job.queries]
            try:
                results = self.searcher.search(queries, max(job.topk for job in batch))
            except Exception as error:  # handed to every caller of the batch, which re-raises it
                for job in batch:
                    job.error = error
                    job.done.set()
                continue
            start = 0
            for job in batch:
                job.result = [hits[: job.topk] for hits in results[start : start + len(job.queries)]]
                start += len(job.queries)
                job.done.set()
