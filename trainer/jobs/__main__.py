"""``python -m trainer.jobs experiment ...``: an experiment's stages without the web app (:mod:`trainer.jobs`)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence


def environment_guards() -> None:
    """Offline, quiet tokenizers, and JAX kept off the GPU: on a GPU image with JAX, whatever imports it (a library
    probing for it) would take 75% of the card per process (seen on an H200: the trainers ran out of memory)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def parser() -> argparse.ArgumentParser:
    from trainer.jobs.plan import parser as experiment_parser

    top = argparse.ArgumentParser(prog="python -m trainer.jobs", description=__doc__)
    jobs = top.add_subparsers(dest="job", required=True, metavar="JOB")
    experiment = experiment_parser()
    jobs.add_parser(
        "experiment",
        parents=[experiment],
        add_help=False,
        help="run an experiment's stages into an experiment spool",
        description=experiment.description,
    )
    return top


def main(argv: Sequence[str] | None = None) -> int:
    from trainer.jobs.plan import PlanError, plan_from_args

    top = parser()
    args = top.parse_args(argv)
    try:
        plan = plan_from_args(args)
    except PlanError as exc:  # before any model loads or any folder is made
        top.error(f"experiment: {exc}")
    environment_guards()
    signal.signal(signal.SIGTERM, _interrupt)  # a leased machine's end: the spool records the run as failed
    from trainer.jobs.runner import run_experiment

    return run_experiment(plan)


if __name__ == "__main__":
    sys.exit(main())
