from django.urls import path

from webapp.trajectories import views

app_name = "trajectories"

urlpatterns = [path("<int:trajectory_id>/", views.trajectory_detail, name="detail")]
