"""The settings records: checked copies, one source of defaults for every entry point,
validation in one place, and the save format (version-2 results included)."""
import dataclasses
import inspect

import numpy as np
import pytest

import constrfl as cf
from constrfl.settings import (ADMMSettings, BaselineSettings, NewtonSettings, from_saved,
                               settings_for, to_saved)
from builders import np_problem

P = np_problem(2, 0.4, rows=200)
RECORDS = (NewtonSettings, ADMMSettings, BaselineSettings)


def test_replace_names_the_unknown_keys():
    with pytest.raises(TypeError, match=r"do not apply to NewtonSettings: \['rho'\]"):
        NewtonSettings().replace(rho=0.1)
    with pytest.raises(TypeError, match=r"ADMMSettings: \['beta_max', 'betta'\]"):
        ADMMSettings().replace(beta_max=1e3, betta=2.0, beta=3.0)
    with pytest.raises(TypeError, match=r"BaselineSettings: \['inner'\]"):
        BaselineSettings().replace(inner="admm")
    assert ADMMSettings().replace(beta=3.0).beta == 3.0


def test_records_are_frozen_and_replace_checks_like_the_constructor():
    s = NewtonSettings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.beta = 1.0
    with pytest.raises(ValueError, match="beta must be a finite positive number"):
        s.replace(beta=0.0)
    with pytest.raises(ValueError, match="inner must be 'newton', 'newton-cg' or 'newton-basis'"):
        s.replace(inner="admm")


@pytest.mark.parametrize("record, options, error, pattern", [
    (NewtonSettings, dict(max_outer=0), ValueError, "max_outer must be a positive integer"),
    (NewtonSettings, dict(max_inner=True), ValueError, "max_inner must be a positive integer"),
    (NewtonSettings, dict(tau_decay=0.0), ValueError, r"tau_decay must be None or in \(0, 1\)"),
    (NewtonSettings, dict(beta_max=np.inf), ValueError, "beta_max must be a finite positive"),
    (ADMMSettings, dict(rho=True), ValueError, "rho must be 'auto', a number, an array"),
    (ADMMSettings, dict(rho=np.ones((2, 2))), ValueError, r"rho has shape \(2, 2\)"),
    (ADMMSettings, dict(adaptive_rho=1), TypeError, "adaptive_rho must be True or False"),
    (ADMMSettings, dict(local_max_iter=2.5), ValueError, "local_max_iter must be a positive"),
    (BaselineSettings, dict(observe="yes"), TypeError, "observe must be True or False"),
    (BaselineSettings, dict(client_fraction=1.5), ValueError, r"client_fraction must be a "
                                                              r"number in \(0, 1\]"),
    (BaselineSettings, dict(epochs=2, local_steps=3, batch_size=4), ValueError,
     "either local_steps or epochs"),
    (BaselineSettings, dict(correction="cubic"), ValueError, "correction must be one of"),
])
def test_validation_lives_in_the_records(record, options, error, pattern):
    with pytest.raises(error, match=pattern):
        record(**options)


def test_values_are_normalized():
    s = ADMMSettings(beta=np.float32(500), rho=np.array([0.1, 0.2]), max_outer=np.int64(3))
    assert type(s.beta) is float and type(s.max_outer) is int
    assert s.rho == (0.1, 0.2) and hash(s) == hash(s.replace())
    assert ADMMSettings(rho=2).rho == 2.0 and ADMMSettings(rho="samples").rho == "samples"


def test_client_rhos_know_the_clients():
    np.testing.assert_array_equal(ADMMSettings(rho=0.5).client_rhos(P), [0.5, 0.5])
    assert ADMMSettings().client_rhos(P) is None
    with pytest.raises(ValueError, match=r"rho for client 'client-1' must be finite"):
        ADMMSettings(rho=[1.0, np.nan]).client_rhos(P)


def test_baseline_defaults_depend_on_the_method():
    s = BaselineSettings()
    assert s.resolved("fedadam")["server_lr"] == 0.01 and s.resolved("fedavg")["server_lr"] == 1.0
    assert s.resolved("fedcada")["client_lr"] == 0.001
    assert s.resolved("fedavgm")["momentum"] == 0.9 and s.resolved("fedavg")["momentum"] is None
    assert s.resolved("fedavg")["local_steps"] == 10
    assert BaselineSettings(penalty="quadratic").resolved("fedavg")["penalty_weight"] == 100.0
    with pytest.raises(ValueError, match="option 'momentum' does not apply to method 'fedavg'"):
        BaselineSettings(momentum=0.5).resolved("fedavg")


def test_settings_for_picks_the_record_and_resolves_auto():
    assert settings_for("fedproxal", {}, P) == NewtonSettings()
    assert settings_for("cproxal", {"beta": 50.0}, P) == NewtonSettings(beta=50.0)
    admm = settings_for("fedproxal", {"inner": "admm", "rho": 0.1}, P)
    assert admm == ADMMSettings(rho=0.1, local_solver="newton")
    assert settings_for("fedavg", {"rounds": 5}, P) == BaselineSettings(rounds=5)
    with pytest.raises(TypeError, match=r"method 'fedproxal' with inner='newton-cg': \['rho'\]"):
        settings_for("fedproxal", {"inner": "newton-cg", "rho": 0.1}, P)
    with pytest.raises(TypeError, match="'inner' does not apply to method 'cproxal'"):
        settings_for("cproxal", {"inner": "newton"}, P)


def test_no_entry_point_spells_an_option():
    """solve, run_server, server_app and simulate take ``**options``; the records hold
    every default.  cf.solve alone spells its own keywords (method, tol, w0, seed, ...):
    the Flower entry points pass them on, with their defaults, unspelled."""
    pytest.importorskip("flwr")
    from constrfl.flower import run_server, server_app, simulate
    names = {n for r in RECORDS for n in r.options()}
    own = set(inspect.signature(cf.solve).parameters) - {"problem", "options"}
    for entry in (cf.solve, run_server, server_app, simulate):
        assert not names & set(inspect.signature(entry).parameters), entry.__name__
    for entry in (run_server, server_app, simulate):
        assert not own & set(inspect.signature(entry).parameters), entry.__name__


@pytest.mark.parametrize("method, options, record", [
    ("fedproxal", dict(max_outer=1), NewtonSettings(max_outer=1)),
    ("fedavg", dict(rounds=2, penalty="quadratic"),
     BaselineSettings(rounds=2, penalty="quadratic")),
])
def test_solve_and_simulate_run_the_records_defaults(method, options, record):
    pytest.importorskip("flwr")
    from constrfl.flower import simulate
    res = cf.solve(P, method=method, **options)
    assert res.settings == to_saved(method, record, (1e-6, 1e-6))
    assert simulate(P, method=method, **options).settings == res.settings


@pytest.mark.parametrize("record", [NewtonSettings(inner="newton-cg", tau_rel=None),
                                    ADMMSettings(rho=(0.1, 0.2), local_solver="lbfgs"),
                                    BaselineSettings(penalty="quadratic", epochs=2,
                                                     batch_size=8)])
def test_the_save_format_round_trips(record):
    assert type(record).from_dict(record.to_dict()) == record
    assert from_saved(to_saved("fedavg" if isinstance(record, BaselineSettings)
                               else "fedproxal", record, (1e-6, 1e-6)))[1] == record


def test_version_2_settings_load():
    """Format version 2 saved cproxal without ``inner`` and an array ``rho`` as an array."""
    v2 = {"max_outer": 2, "s_bar": 0.01, "tau_decay": 0.2, "tau_rel": 0.1, "beta": 100.0,
          "max_inner": 10000, "beta_max": 10000.0, "method": "cproxal"}
    assert from_saved(v2) == ("cproxal", NewtonSettings(max_outer=2))
    v2 = dict(ADMMSettings(local_solver="newton").to_dict(), rho=np.array([0.1, 0.2]),
              method="fedproxal")
    assert from_saved(v2) == ("fedproxal", ADMMSettings(rho=(0.1, 0.2), local_solver="newton"))


def test_a_resumed_solve_takes_its_settings_from_the_result(tmp_path):
    part = cf.solve(P, inner="admm", max_outer=1, beta=500.0)
    back = cf.load_result(part.save(tmp_path / "r"))
    done = cf.solve(P, resume=back, max_outer=300)
    assert done.settings == dict(part.settings, max_outer=300)
