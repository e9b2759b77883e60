from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module", ["retrieval.encoders", "retrieval.hybrid", "retrieval.client", "retrieval.index"]
)
def test_it_keeps_the_docstring_examples_true(module: str) -> None:
    failures, tried = doctest.testmod(importlib.import_module(module))
    assert tried > 0 and failures == 0
