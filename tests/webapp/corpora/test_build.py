"""Index builds: created pending and enqueued on commit, built by the task with throttled progress, failures kept."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest

from retrieval.index import IndexMetadata
from tests.webapp.corpora.conftest import ENCODER, N_PASSAGES
from webapp.celery import app
from webapp.corpora import services
from webapp.corpora.models import Corpus, Index
from webapp.corpora.services import index_build, index_create
from webapp.corpora.tasks import index_build_task

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def index_dir(settings, tmp_path):
    settings.RETRIEVAL_INDEX_DIR = tmp_path / "indexes"
    settings.RETRIEVAL_EMBEDDINGS_DIR = tmp_path / "embeddings"
    return settings.RETRIEVAL_INDEX_DIR


def _create(corpus: Corpus, **fields: str) -> Index:
    with mock.patch.object(index_build_task, "delay"):
        return index_create(corpus=corpus, **{"kind": "hnsw", "encoder": ENCODER, **fields})


def test_it_creates_a_pending_index_and_enqueues_its_build_on_commit(
    corpus, index_dir, django_capture_on_commit_callbacks
):
    with mock.patch.object(index_build_task, "delay") as delay:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            index = index_create(corpus=corpus, kind="flat", encoder=ENCODER)
        delay.assert_not_called()  # not before the row is committed: the worker would not find it yet
        for callback in callbacks:
            callback()

    delay.assert_called_once_with(index.pk)
    assert (index.status, index.name, index.path) == (
        "pending",
        "flat-hashing-256",
        str(index_dir / str(index.pk)),
    )


def test_it_routes_builds_to_the_retrieval_queue():
    assert app.amqp.router.route({}, index_build_task.name)["queue"].name == "retrieval"


def test_it_names_indexes_uniquely_and_drops_the_encoder_of_bm25(corpus):
    first, second = _create(corpus), _create(corpus)
    bm25 = _create(corpus, kind="bm25")

    assert (first.name, second.name) == ("hnsw-hashing-256", "hnsw-hashing-256-2")
    assert (bm25.name, bm25.encoder) == ("bm25", "")


def test_it_builds_an_index_writing_progress_through_every_stage(corpus, index_dir, monkeypatch):
    monkeypatch.setattr(services, "PROGRESS_WRITE_SECONDS", 0.0)
    index = _create(corpus)
    seen: list[tuple[str, str, float]] = []
    write = services._ProgressWriter.__call__

    def watch(self, stage, done, total):
        write(self, stage, done, total)
        row = Index.objects.values_list("status", "stage", "progress").get(pk=self.index_id)
        seen.append(row)

    with mock.patch.object(services._ProgressWriter, "__call__", watch):
        built = index_build(index_id=index.pk)

    assert {status for status, _, _ in seen} == {"building"}
    assert [s for s in dict.fromkeys(stage for _, stage, _ in seen)] == [
        "scan",
        "encode",
        "index",
        "tune",
        "save",
    ]
    fractions = [progress for _, _, progress in seen]
    assert fractions == sorted(fractions) and 0 < fractions[-1] <= 1
    assert (built.status, built.progress, built.stage, built.error) == ("ready", 1.0, "", "")
    assert built.build_seconds > 0 and built.size_bytes > 0 and built.started_at <= built.finished_at
    metadata = IndexMetadata.read(Path(built.path))
    assert built.metadata["n_passages"] == metadata.n_passages == N_PASSAGES == corpus.passage_count
    assert built.metadata["corpus_sha256"] == metadata.corpus_sha256
    assert json.loads((Path(built.path) / "metadata.json").read_text())["encoder"] == ENCODER


def test_it_builds_bm25_without_an_encoder(corpus):
    index = _create(corpus, kind="bm25")

    built = index_build(index_id=index.pk)

    assert (built.status, built.encoder, built.metadata["encoder"]) == ("ready", "", "bm25")


def test_it_throttles_progress_writes(corpus, monkeypatch):
    index = _create(corpus)
    Index.objects.filter(pk=index.pk).update(status=Index.Status.BUILDING)
    clock = iter([100.0, 100.1, 100.2, 100.3, 100.7, 100.8])
    monkeypatch.setattr(services.time, "monotonic", lambda: next(clock))
    writer = services._ProgressWriter(index.pk)

    with mock.patch.object(Index.objects, "filter", wraps=Index.objects.filter) as filter_:
        writer("encode", 10, 100)  # a new stage: written
        writer("encode", 20, 100)  # 0.1 s later: skipped
        writer("encode", 30, 100)  # skipped
        writer("index", 0, 100)  # a new stage is always written
        writer("index", 50, 100)  # 0.4 s after the last write: skipped
        writer("index", 60, 100)  # 0.5 s: written

    assert filter_.call_count == 3
    index.refresh_from_db()
    assert (index.stage, index.progress) == ("index", 0.91)


def test_it_marks_a_build_failed_with_the_corpus_error(db, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "0", "contents": "A\\nok"}\n{"id": "1"}\n')
    corpus = Corpus.objects.create(name="bad", source_path=str(bad))
    index = _create(corpus)

    with pytest.raises(ValueError):  # re-raised so the worker logs the traceback
        index_build(index_id=index.pk)

    index.refresh_from_db()
    assert index.status == "failed" and index.finished_at is not None
    assert "bad.jsonl:2: field 'contents' is missing" in index.error
    assert not Path(index.path).exists()  # no half-built folder left behind


def test_it_marks_a_build_failed_when_the_corpus_file_is_gone(db):
    corpus = Corpus.objects.create(name="gone", source_path="/nowhere/corpus.jsonl")
    index = _create(corpus)

    with pytest.raises(FileNotFoundError):
        index_build(index_id=index.pk)

    index.refresh_from_db()
    assert index.status == "failed"
    assert "has no source file at '/nowhere/corpus.jsonl'" in index.error


def test_it_builds_a_redelivered_index_only_once(corpus):
    index = _create(corpus)
    Index.objects.filter(pk=index.pk).update(status=Index.Status.READY)

    with mock.patch("retrieval.index.build_index") as build:
        assert index_build(index_id=index.pk).status == "ready"
    build.assert_not_called()
