from django.apps import AppConfig


class TrajectoriesConfig(AppConfig):
    name = "webapp.trajectories"
    label = "trajectories"

    def ready(self) -> None:
        from webapp.runs import hooks
        from webapp.trajectories.selectors import trajectory_list

        # the run page's newest trajectories (and its polled fragment's)
        hooks.run_part_register("trajectories", lambda run: trajectory_list(run_id=run.pk)[:20])
