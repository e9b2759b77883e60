from django.contrib import admin

from webapp.trajectories.models import JudgeCallCache, JudgeVerdict, JudgeVersion, Step, Trajectory


class StepInline(admin.TabularInline):
    model = Step
    extra = 0
    fields = ("index", "kind", "query", "reward")
    show_change_link = True


@admin.register(Trajectory)
class TrajectoryAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "run",
        "format",
        "format_ok",
        "final_answer",
        "exact_match",
        "n_steps",
        "n_searches",
        "total_reward",
    )
    list_filter = ("format", "format_ok", "exact_match")
    search_fields = ("question_text", "final_answer")
    raw_id_fields = ("run", "question", "dataset")
    list_select_related = ("run",)
    inlines = (StepInline,)


@admin.register(Step)
class StepAdmin(admin.ModelAdmin):
    list_display = ("id", "trajectory", "index", "kind", "query", "reward")
    list_filter = ("kind",)
    raw_id_fields = ("trajectory",)


@admin.register(JudgeVerdict)
class JudgeVerdictAdmin(admin.ModelAdmin):
    list_display = ("id", "trajectory", "step", "detector", "outcome", "judge_model", "latency_ms")
    list_filter = ("detector", "outcome", "judge_model")
    raw_id_fields = ("trajectory", "step")


@admin.register(JudgeCallCache)
class JudgeCallCacheAdmin(admin.ModelAdmin):
    list_display = ("key", "judge_model", "hits", "created_at")
    search_fields = ("key", "judge_model")


@admin.register(JudgeVersion)
class JudgeVersionAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "model", "sha256", "created_at")
    list_filter = ("kind",)
    search_fields = ("name", "model", "sha256")
    readonly_fields = ("sha256", "spec")
