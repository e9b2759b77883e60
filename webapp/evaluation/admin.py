from django.contrib import admin

from webapp.evaluation.models import EvaluationReport, EvaluationStats, JudgePrice, ReferencePlan, RejudgeJob


@admin.register(EvaluationReport)
class EvaluationReportAdmin(admin.ModelAdmin):
    list_display = ("run", "dataset", "position")
    list_select_related = ("run",)


@admin.register(EvaluationStats)
class EvaluationStatsAdmin(admin.ModelAdmin):
    list_display = ("run", "n_trajectories", "n_judge_errors", "n_reward_errors", "seconds")
    list_select_related = ("run",)


@admin.register(ReferencePlan)
class ReferencePlanAdmin(admin.ModelAdmin):
    list_display = ("question", "planner_model", "created_at")
    raw_id_fields = ("question",)


@admin.register(JudgePrice)
class JudgePriceAdmin(admin.ModelAdmin):
    list_display = ("model", "input_per_million", "output_per_million", "currency", "updated_at")
    search_fields = ("model",)


@admin.register(RejudgeJob)
class RejudgeJobAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "version", "status", "n_done", "n_trajectories", "n_errors", "created_at")
    list_filter = ("status",)
