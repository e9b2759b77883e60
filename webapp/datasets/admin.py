from django.contrib import admin

from webapp.datasets.models import Dataset, Question


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ("name", "question_count", "source", "created_at")
    search_fields = ("name",)


@admin.register(Question)
class QuestionAdmin(admin.ModelAdmin):
    list_display = ("external_id", "text", "data_source", "dataset")
    list_filter = ("dataset", "data_source")
    search_fields = ("external_id", "text")
    list_select_related = ("dataset",)
