"""Passage corpora (FlashRAG JSONL) and the retrieval indexes built over them."""

from __future__ import annotations

from django.db import models


class Corpus(models.Model):
    name = models.CharField(max_length=200, unique=True)
    source_path = models.CharField(max_length=1000, blank=True)
    passage_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "corpora"
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name


class Passage(models.Model):
    """One retrievable document. ``external_id`` is the corpus file's ``id``: what a retriever returns."""

    corpus = models.ForeignKey(Corpus, on_delete=models.CASCADE, related_name="passages")
    external_id = models.CharField(max_length=200)
    title = models.TextField(blank=True)
    text = models.TextField()

    class Meta:
        constraints = (
            models.UniqueConstraint(fields=["corpus", "external_id"], name="passage_unique_external_id"),
        )
        indexes = (models.Index(fields=["corpus", "title"], name="passage_corpus_title"),)

    def __str__(self) -> str:
        return f"{self.external_id}: {self.title}"


class Index(models.Model):
    class Kind(models.TextChoices):
        FLAT = "flat", "FAISS flat"
        IVF = "ivf", "FAISS IVF"
        HNSW = "hnsw", "FAISS HNSW"
        BM25 = "bm25", "BM25"

    class Status(models.TextChoices):
        PENDING = "pending"
        BUILDING = "building"
        READY = "ready"
        FAILED = "failed"

    corpus = models.ForeignKey(Corpus, on_delete=models.CASCADE, related_name="indexes")
    name = models.CharField(max_length=200)
    encoder = models.CharField(
        max_length=200, blank=True, help_text="sentence-transformers model; empty for BM25"
    )
    kind = models.CharField(max_length=8, choices=Kind.choices)
    path = models.CharField(max_length=1000, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    progress = models.FloatField(default=0.0, help_text="fraction of the build done, 0..1")
    stage = models.CharField(
        max_length=16, blank=True, help_text="build stage: scan, encode, index, tune or save"
    )
    error = models.TextField(blank=True)
    build_seconds = models.FloatField(null=True, blank=True)
    size_bytes = models.BigIntegerField(null=True, blank=True)
    metadata = models.JSONField(
        default=dict, blank=True, help_text="the index folder's metadata.json (corpus sha256, params, tuning)"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="the build's last sign of life (its progress writes)"
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "indexes"
        constraints = (
            models.UniqueConstraint(fields=["corpus", "name"], name="index_unique_name"),
            models.CheckConstraint(
                condition=models.Q(progress__gte=0, progress__lte=1), name="index_progress_0_1"
            ),
            models.CheckConstraint(
                condition=models.Q(kind="bm25") | ~models.Q(encoder=""), name="index_dense_needs_encoder"
            ),
        )

    def __str__(self) -> str:
        return f"{self.corpus.name}/{self.name}"

    @property
    def is_active(self) -> bool:
        """Still waiting for a worker or building: its status fragment keeps polling."""
        return self.status in (self.Status.PENDING, self.Status.BUILDING)
