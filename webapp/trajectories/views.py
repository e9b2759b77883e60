from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from webapp.trajectories import selectors
from webapp.trajectories.chat import steps_with_tool_calls
from webapp.trajectories.models import Trajectory


def trajectory_detail(request: HttpRequest, trajectory_id: int) -> HttpResponse:
    try:
        trajectory = selectors.trajectory_get(trajectory_id=trajectory_id)
    except Trajectory.DoesNotExist:
        raise Http404("No such trajectory") from None
    return render(
        request,
        "trajectories/trajectory_detail.html",
        {"trajectory": trajectory, "steps": steps_with_tool_calls(trajectory)},
    )
