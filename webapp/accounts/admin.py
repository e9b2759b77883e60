from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from webapp.accounts.models import Profile


class ProfileInline(admin.StackedInline):
    model = Profile
    can_delete = False


class SearchlabUserAdmin(UserAdmin):
    inlines = (ProfileInline,)
    list_display = (*UserAdmin.list_display, "role")

    @admin.display(description="role")
    def role(self, user):  # type: ignore[no-untyped-def]
        return getattr(getattr(user, "profile", None), "role", "")


admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), SearchlabUserAdmin)


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ("user", "role")
    list_filter = ("role",)
    search_fields = ("user__username",)
