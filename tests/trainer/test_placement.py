"""The placement of a job, one closed set (trainer.placement): what the trainer config, the forms and the web app's
executors, ingest and spool replay read."""

from __future__ import annotations

import pytest

from trainer.config import ConfigError, config_from_dict
from trainer.placement import PLACEMENTS, STARTABLE, Placement, placement_of


def test_the_set_is_local_ray_external_and_only_the_first_two_are_started_by_searchlab() -> None:
    assert PLACEMENTS == ("local", "ray", "external")
    assert STARTABLE == ("local", "ray")


def test_a_stored_config_without_the_key_runs_locally_and_the_old_strings_load() -> None:
    assert placement_of({}) is Placement.LOCAL
    assert placement_of(None) is Placement.LOCAL
    assert placement_of({"executor": "ray"}) is Placement.RAY
    assert placement_of({"executor": "external"}) is Placement.EXTERNAL
    with pytest.raises(ValueError, match="executor: must be one of local, ray, external, got 'k8s'"):
        placement_of({"executor": "k8s"})


def test_the_trainer_config_knows_every_placement_and_refuses_others() -> None:
    for value in PLACEMENTS:
        assert config_from_dict({"output_dir": "out", "executor": value}).executor == value
    assert config_from_dict({"output_dir": "out"}).executor == "local"
    with pytest.raises(ConfigError) as error:
        config_from_dict({"output_dir": "out", "executor": "k8s"})
    assert error.value.field == "executor"
