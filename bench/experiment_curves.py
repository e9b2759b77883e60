"""Per-step training curves of an experiment's arms, overlaid: redundant-search rate (the evidence judge's OSR
without retrieval misses, ``osr_redundant``), OSR and searches per rollout, and what lets a process term act at all:
the rollouts' accuracy and the share of groups whose order it changed, from each arm's ``metrics.jsonl``.

    python bench/experiment_curves.py OUT.png NAME=RUN_OUTPUT_DIR [NAME=RUN_OUTPUT_DIR ...] [--title TEXT]

It also prints the same figures per step as a Markdown table (a row per figure and arm, a column per step), with
the figures that say whether the process term could act: groups with reward spread as sampled, replacement groups
drawn, the mean process bonus, and the step's seconds.

Needs matplotlib (not a project requirement: ``pip install matplotlib`` into the venv that runs this).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

PANELS = (
    ("osr_redundant", "redundant-search rate\n(OSR without retrieval misses)"),
    ("osr", "OSR (evidence judge)"),
    ("searches/mean", "searches per rollout"),
    ("accuracy", "accuracy of the step's rollouts"),
    ("groups/process_reordered_rate", "groups the process term\nreordered"),
)

# The table's rows besides the panels: what decides whether the process term reaches the gradient, and the cost.
TABLE_EXTRA = (
    ("groups/spread_rate_before", "groups with spread as sampled"),
    ("groups/dynamic_draws", "replacement groups drawn"),
    ("reward/process_bonus/mean", "mean process bonus"),
    ("step_time", "seconds"),
)


def curves(output_dir: Path) -> dict[str, list[tuple[int, float]]]:
    points: dict[str, dict[int, float]] = defaultdict(dict)
    path = output_dir / "metrics.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise SystemExit(f"{path}: cannot read ({error.strerror}); give a run's output folder") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            # A resumed step's row replaces the old one.
            points[row["key"]][int(row["step"])] = float(row["value"])
        except (ValueError, KeyError, TypeError) as error:
            raise SystemExit(f"{path}:{number}: not a metrics row ({error})") from None
    if not points:
        raise SystemExit(f"{path}: no metrics rows yet (has the run finished a step?)")
    return {key: sorted(values.items()) for key, values in points.items()}


def step_table(arms: dict[str, dict[str, list[tuple[int, float]]]]) -> str:
    """Markdown: a row per (figure, arm), a column per step."""
    steps = sorted({step for data in arms.values() for points in data.values() for step, _ in points})
    lines = [
        "| figure | arm | " + " | ".join(str(s) for s in steps) + " |",
        "|---|---|" + "---:|" * len(steps),
    ]
    for key, label in (*PANELS, *TABLE_EXTRA):
        for name, data in arms.items():
            values = dict(data.get(key, []))
            digits = 0 if key == "step_time" else 2
            cells = [f"{values[s]:.{digits}f}" if s in values else "" for s in steps]
            lines.append(f"| {' '.join(label.split())} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("arms", nargs="+", help="NAME=RUN_OUTPUT_DIR")
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("needs matplotlib: pip install matplotlib", file=sys.stderr)
        return 2
    arms: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for arm in args.arms:
        name, _, folder = arm.rpartition("=")  # the last "=": a name may hold one ("λp = 0.4")
        if not name or not folder:
            parser.error(f"{arm!r}: give NAME=RUN_OUTPUT_DIR")
        arms[name] = curves(Path(folder))
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4.2 * len(PANELS), 3.4))
    for name, data in arms.items():
        for ax, (key, label) in zip(axes, PANELS, strict=True):
            if data.get(key):
                steps, values = zip(*data[key], strict=True)
                ax.plot(steps, values, marker="o", label=name)
            ax.set_title(label, fontsize=10)
            ax.set_xlabel("training step")
            ax.grid(alpha=0.3)
    axes[0].legend(fontsize=9)
    if args.title:
        fig.suptitle(args.title, fontsize=10)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(step_table(arms))
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
