"""The supervisor's cooperative stop is SIGINT (webapp.training.supervisor): make sure a trainer hears it.

A process inherits an *ignored* SIGINT from whoever started it — a shell starts background jobs (``cmd &``, a CI
script in the background, ``nohup``) with SIGINT ignored, and the Celery worker passes that on — and Python then
leaves it ignored instead of raising ``KeyboardInterrupt``. Such a trainer would never stop cooperatively and would
always be killed after the grace period. Every trainer entry point calls :func:`listen_for_stop` first.
"""

from __future__ import annotations

import signal


def listen_for_stop() -> None:
    """SIGINT raises ``KeyboardInterrupt`` in this process, whatever disposition it inherited."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
