from django.contrib import admin

from webapp.corpora.models import Corpus, Index, Passage


@admin.register(Corpus)
class CorpusAdmin(admin.ModelAdmin):
    list_display = ("name", "passage_count", "source_path", "created_at")
    search_fields = ("name",)


@admin.register(Passage)
class PassageAdmin(admin.ModelAdmin):
    list_display = ("external_id", "title", "corpus")
    list_filter = ("corpus",)
    search_fields = ("external_id", "title")
    list_select_related = ("corpus",)
    show_full_result_count = False  # counting 21M passages on every page is slow


@admin.register(Index)
class IndexAdmin(admin.ModelAdmin):
    list_display = ("name", "corpus", "kind", "encoder", "status", "progress", "build_seconds", "size_bytes")
    list_filter = ("kind", "status")
    list_select_related = ("corpus",)
