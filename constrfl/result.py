"""The result of a solve (:class:`SolveResult`) and its save format: ``result.json``
(plain JSON) beside ``arrays.npz`` (NumPy, no pickle).

In ``result.json`` an array is ``{"$array": key}`` (its key in ``arrays.npz``), a dict
``{"$dict": [[key, value], ...]}``, a non-finite float ``{"$float": "nan"}`` and a
dataclass ``{"$type": tag, field: value, ...}``, with the stable tag its class registered
with :func:`constrfl.records.saved_as` ("outer-state", "admm-state", ...).  Version 4
writes those tags (as version 3 did; version 2 wrote class names, which :data:`_V2_TAGS`
maps to tags).  Files of versions 2 and 3 load — point, status, multipliers, residuals
(in the ∞-norm then), history — but without their solver state, which belongs to the
protocol before sums (each site's values reached the server): they cannot be resumed.
Version 1 is refused.
"""
from __future__ import annotations

import dataclasses
import json
import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .records import KKT, Multipliers, saved_class, saved_tag
from .status import STATUSES

__all__ = ["Multipliers", "KKT", "SolveResult", "STATUSES", "load_result", "FORMAT_VERSION",
           "DamagedResult"]

FORMAT = "constrfl-result"
#: the version written (the module docstring says which others are read)
FORMAT_VERSION = 4
#: version 2's tags (class names) as the registered ones
_V2_TAGS = {"Multipliers": "multipliers", "KKT": "kkt", "OuterState": "outer-state",
            "ADMMState": "admm-state", "NewtonState": "newton-state",
            "BaselineState": "baseline-state"}
#: each version read: its tags as the registered ones
_READ = {2: _V2_TAGS, 3: {}, FORMAT_VERSION: {}}
#: the first version whose solver state this constrfl resumes (the protocol of sums)
RESUMABLE_VERSION = 4


@dataclass(repr=False)
class SolveResult:
    """What :func:`constrfl.solve` returns (a plain record, like scipy's OptimizeResult).

    ``w`` is the last accepted iterate (the last completed outer iteration's), with the
    ``multipliers`` each party reported there and ``kkt``/``objective`` computed by the
    parties at that point (the KKT round of the protocol, from scratch).  ``multipliers``
    maps each party (``"server"`` and the client names) to its :class:`Multipliers`, in
    the Lagrangian convention ``F + μᵀc + νᵀh`` with μ ≥ 0.  ``rounds``, ``bytes_up`` and
    ``bytes_down`` count the messages (8 bytes a float).  ``history`` holds one dict per
    outer iteration (per round for the baselines).  ``error`` is the exception behind a
    ``client_error`` (its ``__cause__`` the original) or a failed callback.  ``state``
    is the solver's state (see :meth:`save`; ``cf.solve(problem, resume=res)``
    continues from it) and ``settings`` the options it ran with.
    """

    w: np.ndarray
    status: str
    message: str
    objective: float
    multipliers: dict
    kkt: KKT
    method: str
    outer_iterations: int = 0
    inner_iterations: int = 0
    rounds: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    time: float = 0.0
    history: list = field(default_factory=list)
    error: BaseException | None = None
    state: dict | None = None
    settings: dict = field(default_factory=dict)

    @property
    def success(self):
        return self.status == "optimal"

    def __repr__(self):
        k = self.kkt
        return (f"SolveResult(status={self.status!r}, success={self.success}, "
                f"objective={self.objective:.10g}, stationarity={k.stationarity:.1e}, "
                f"feasibility={k.feasibility:.1e}, outer={self.outer_iterations}, "
                f"rounds={self.rounds}, time={self.time:.3f}s)")

    def to_dict(self):
        """The result as plain Python types (JSON-serializable; NaN/inf as JSON's
        ``NaN``/``Infinity``), without the solver state."""
        return {"w": self.w.tolist(), "status": self.status, "message": self.message,
                "success": self.success, "objective": self.objective,
                "multipliers": {k: {"ineq": m.ineq.tolist(), "eq": m.eq.tolist()}
                                for k, m in self.multipliers.items()},
                "kkt": dataclasses.asdict(self.kkt), "method": self.method,
                "outer_iterations": self.outer_iterations,
                "inner_iterations": self.inner_iterations, "rounds": self.rounds,
                "bytes_up": self.bytes_up, "bytes_down": self.bytes_down, "time": self.time,
                "history": _plain(self.history), "settings": _plain(self.settings),
                "error": None if self.error is None else repr(self.error)}

    def plot(self, **kwargs):
        """Stationarity, feasibility and objective gap against rounds (matplotlib);
        see :func:`constrfl.plot.plot_result`."""
        from .plot import plot_result
        return plot_result(self, **kwargs)

    def save(self, path):
        """Write the result and its solver state to the directory ``path``:
        ``result.json`` (format name and version, status, settings, the problem's
        dimension and parties, history; arrays referenced by key) and ``arrays.npz``
        (``w``, multipliers, the solver and party states).  No pickle."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        arrays = {}
        record = {"format": FORMAT, "version": FORMAT_VERSION,
                  **{f.name: _encode(getattr(self, f.name), arrays, f.name)
                     for f in dataclasses.fields(self) if f.name != "error"},
                  "error": None if self.error is None else repr(self.error)}
        with open(path / "result.json", "w") as fh:
            json.dump(record, fh, indent=1, allow_nan=False)
        np.savez(path / "arrays.npz", **arrays)
        return path


class DamagedResult(ValueError):
    """A saved result that cannot be read: the message names the file and what is
    wrong."""


def load_result(path):
    """Read a result written by :meth:`SolveResult.save` (``error`` comes back as its
    text in ``message``; the exception object is not stored).  A file that is not a
    constrfl result, of another version, or damaged (cut short, empty, an entry missing
    or of the wrong kind, a status or method that does not exist) raises
    :class:`DamagedResult` (a ValueError) naming the file and the damage."""
    path = Path(path)
    json_path, npz_path = path / "result.json", path / "arrays.npz"
    try:
        with open(json_path) as fh:
            record = json.load(fh)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no result.json (not a saved constrfl result)") \
            from None
    except (ValueError, UnicodeDecodeError) as err:
        raise DamagedResult(f"{json_path}: not readable JSON (cut short or damaged: "
                            f"{err})") from None
    if not isinstance(record, dict):
        raise DamagedResult(f"{json_path}: holds a {type(record).__name__}, not a result")
    if record.get("format") != FORMAT:
        raise ValueError(f"{path}: not a constrfl result (format {record.get('format')!r})")
    tags = _READ.get(record.get("version"))
    if tags is None:
        raise ValueError(f"{path}: result format version {record.get('version')!r}; this "
                         f"constrfl reads versions {', '.join(map(str, _READ))}")
    try:
        with np.load(npz_path, allow_pickle=False) as npz:
            arrays = dict(npz)
    except FileNotFoundError:
        raise DamagedResult(f"{npz_path}: missing (a result is result.json beside "
                            "arrays.npz)") from None
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        raise DamagedResult(f"{npz_path}: not a readable archive (cut short or damaged: "
                            f"{err})") from None
    fields = {f.name for f in dataclasses.fields(SolveResult)} - {"error"}
    missing = sorted(fields - set(record))
    if missing:
        raise DamagedResult(f"{json_path}: entries missing: {', '.join(missing)}")
    if record["version"] < RESUMABLE_VERSION:
        record = dict(record, state=None)      # an earlier protocol's: not resumable
    try:
        res = SolveResult(**{k: _decode(record[k], arrays, tags) for k in fields})
    except KeyError as err:
        raise DamagedResult(f"{path}: the array {err.args[0]!r} that result.json names "
                            f"is not in arrays.npz") from None
    except (ValueError, TypeError, AttributeError) as err:
        raise DamagedResult(f"{json_path}: an entry is not what a result holds ({err})") \
            from None
    _check_values(res, json_path)
    return res


def _check_values(res, where):
    """A loaded result's values are those a solve writes (named errors otherwise)."""
    from .methods import BASELINES, METHODS
    if res.status not in STATUSES:
        raise DamagedResult(f"{where}: status {res.status!r} is not a constrfl status "
                            f"({', '.join(STATUSES)})")
    if res.method not in METHODS + BASELINES:
        raise DamagedResult(f"{where}: method {res.method!r} is not a constrfl method")
    if not (isinstance(res.w, np.ndarray) and res.w.ndim == 1 and res.w.dtype == np.float64):
        raise DamagedResult(f"{where}: w is not a vector of floats")
    if not isinstance(res.kkt, KKT):
        raise DamagedResult(f"{where}: kkt is not the KKT record")
    if not (isinstance(res.multipliers, dict)
            and all(isinstance(m, Multipliers) for m in res.multipliers.values())):
        raise DamagedResult(f"{where}: multipliers are not one record a party")
    if not (isinstance(res.history, list) and all(isinstance(h, dict) for h in res.history)):
        raise DamagedResult(f"{where}: history is not a list of records")
    for name in ("rounds", "bytes_up", "bytes_down", "outer_iterations", "inner_iterations"):
        value = getattr(res, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise DamagedResult(f"{where}: {name} is {value!r}, not a count")


# -- the codec: arrays to the .npz, dataclasses tagged, non-finite floats spelled out ------

def _encode(x, arrays, key):
    if isinstance(x, np.ndarray):
        arrays[key] = x
        return {"$array": key}
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {"$type": saved_tag(type(x)),
                **{f.name: _encode(getattr(x, f.name), arrays, f"{key}/{f.name}")
                   for f in dataclasses.fields(x)}}
    if isinstance(x, dict):
        return {"$dict": [[k, _encode(v, arrays, f"{key}/{k}")] for k, v in x.items()]}
    if isinstance(x, (list, tuple)):
        return [_encode(v, arrays, f"{key}/{i}") for i, v in enumerate(x)]
    if isinstance(x, (float, np.floating)) and not math.isfinite(x):
        return {"$float": repr(float(x))}
    if isinstance(x, np.generic):
        return x.item()
    return x


def _decode(x, arrays, tags):
    """The value ``x`` encodes; ``tags`` maps a file's older tags to registered ones."""
    if isinstance(x, list):
        return [_decode(v, arrays, tags) for v in x]
    if not isinstance(x, dict):
        return x
    if "$array" in x:
        return arrays[x["$array"]]
    if "$float" in x:
        return float(x["$float"])
    if "$dict" in x:
        return {k: _decode(v, arrays, tags) for k, v in x["$dict"]}
    cls = saved_class(tags.get(x["$type"], x["$type"]))
    return cls(**{k: _decode(v, arrays, tags) for k, v in x.items() if k != "$type"})


def _plain(x):
    """NumPy values as Python ones, recursively (for :meth:`SolveResult.to_dict`)."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x
