"""Jobs that run without the web app: ``python -m trainer.jobs experiment ...`` runs an experiment's stages.

One stage runner for any machine (a CPU, a bare GPU box): the index, the base model, the warm start, the screen of
the training questions, every arm's training (several at once), the evaluations and the table. It writes an
*experiment spool* (:mod:`trainer.jobs.spool`): a folder the web app replays into one experiment
(``manage.py replay_spool DIR`` or the Imports page). Modules:

* :mod:`trainer.jobs.plan`: the command line into a checked :class:`~trainer.jobs.plan.ExperimentPlan`;
* :mod:`trainer.jobs.spool`: the experiment spool's writer (manifest, stage folders, atomic writes, resume);
* :mod:`trainer.jobs.stages`: index, base model, warm start, the training candidates and the screen;
* :mod:`trainer.jobs.evaluation`: an evaluation stage (greedy or sampled) into ``records.jsonl``;
* :mod:`trainer.jobs.training`: each arm and seed's trainer config, the trainers as spooled subprocesses;
* :mod:`trainer.jobs.timing`: per-step phase times of a trained run (``timing.csv``), the GPU memory check;
* :mod:`trainer.jobs.analysis`: the tables' figures (per seed pair, and pooled over seeds with the decision rule);
* :mod:`trainer.jobs.report`: ``result.json`` and ``result.md`` (and the tables in Markdown);
* :mod:`trainer.jobs.runner`: the stages in order.

Nothing here imports Django (tests/test_layers.py).
"""
