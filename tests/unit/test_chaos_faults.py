"""Which faults `voxlog chaos` injects: the cluster's own only on three brokers, `--only` by name."""

from __future__ import annotations

import pytest

from voxlog.chaos.cluster_faults import CLUSTER_FAULTS, leader_kill, rolling_restart
from voxlog.chaos.faults import FAULTS, broker_kill
from voxlog.chaos.run import faults_for, main

pytestmark = pytest.mark.unit


def test_one_broker_takes_the_faults_of_one_and_three_take_the_clusters_too():
    assert faults_for(1) == FAULTS
    assert faults_for(3) == FAULTS + CLUSTER_FAULTS
    assert not set(CLUSTER_FAULTS) & set(FAULTS)


def test_only_injects_the_faults_named_in_the_order_given():
    assert faults_for(3, "rolling_restart, leader_kill") == (rolling_restart, leader_kill)
    assert faults_for(1, "broker_kill") == (broker_kill,)


def test_a_cluster_fault_asked_of_one_broker_is_refused_with_the_names_there_are():
    with pytest.raises(ValueError, match="no fault named leader_kill for 1 broker") as refused:
        faults_for(1, "leader_kill")
    assert "broker_kill" in str(refused.value)


def test_the_command_refuses_an_unknown_fault_before_it_starts_anything(capsys):
    assert main(quick=True, docs=None, brokers=3, only="no_such_fault") == 2
    assert "no fault named no_such_fault" in capsys.readouterr().err
