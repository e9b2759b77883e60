"""Adapters from the reference test vectors (../shared/reference/*.jsonl) to our reference-compatible variants.

Each record is ``{"fn": <reference function id>, "input": {...}, "output": ...}``. Each module here maps the fn ids
of one vector file to an *adapter*: a function that takes the record's ``input`` and returns what the released code
returned, computed by our code (``scoring.rewards.*`` reference variants, ``scoring.metrics``, ...). An adapter only
translates arguments and result shapes; the behaviour it checks lives in the scoring modules.

Where the released code raised, the record's output is ``{"error": "ExcType: message"}``; the adapter then raises an
exception of that type name (our reference variant reproduces the failure on purpose, and says so).

Adapters listed in a module's ``APPROXIMATE`` are compared at a relative tolerance of 1e-6 (the reference ran in
float32); everything else must be equal, floats included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Adapter = Callable[[dict[str, Any]], Any]
