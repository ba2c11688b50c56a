"""The codec's messages through Flower's own serialization, bit for bit: deflated into the
objects a SuperLink stores and forwards (``Message`` -> ``RecordDict`` -> its records) and
inflated back, as on every deployment.  Flower's serialization lives in its runtime's
modules (``flwr.supercore.inflatable``), which constrfl itself does not import: the test
runs on the flwr versions constrfl's warm runtime is tested with
(:data:`constrfl.flower.warm.pinned.TESTED`) and is skipped on any other.
"""
import numpy as np
import pytest

from test_flower import SPECIAL, bits

pytest.importorskip("flwr")

from constrfl.flower import codec  # noqa: E402
from constrfl.flower.grid import LocalGrid  # noqa: E402
from constrfl.flower.warm import pinned  # noqa: E402
from constrfl.messages import MessageType as M  # noqa: E402

if not pinned.tested():
    pytest.skip(f"flwr {pinned.installed()}: its serialization internals are tested on "
                f"{', '.join(pinned.TESTED)} only", allow_module_level=True)

from flwr.supercore.inflatable.inflatable_object import (get_all_nested_objects,  # noqa: E402
                                                          no_object_id_recompute)
from flwr.supercore.inflatable.inflatable_utils import \
    inflate_object_from_contents  # noqa: E402


def wire_round_trip(message):
    """``(copy, nbytes)``: the message deflated into Flower's objects and inflated back,
    and the bytes of those objects."""
    with no_object_id_recompute():          # as Flower's push paths: ids computed once
        objects = get_all_nested_objects(message)
        contents = {oid: obj.deflate() for oid, obj in objects.items()}
        root = message.object_id
    nbytes = sum(len(c) for c in contents.values())     # (inflating consumes contents)
    return inflate_object_from_contents(root, contents), nbytes


def test_payload_round_trips_bit_for_bit_through_flower_serialization():
    payload = {"w": SPECIAL.copy(), "empty": np.zeros(0), "H": SPECIAL[:12].reshape(3, 4),
               "F": np.asfortranarray(SPECIAL[:12].reshape(3, 4)), "flag": True, "cold": False,
               "steps": 7, "big": 2 ** 62, "neg": -3, "lr": 0.1, "zero": -0.0, "nan": np.nan,
               "inf": -np.inf, "tiny": 5e-324}
    fields = {"seq": 3, "solve": "x", "prev": 2, "type": M.ADMM_STEP}
    msg = LocalGrid([]).create_message(codec.encode(payload, fields),
                                       codec.flower_type(M.ADMM_STEP), 7, "g")
    wire, nbytes = wire_round_trip(msg)
    assert wire is not msg and nbytes > 8 * SPECIAL.size
    # Flower sends each object with a request of its own: the message, its RecordDict and
    # its one ConfigRecord (7 with an ArrayRecord of one Array and two ConfigRecords)
    assert len(get_all_nested_objects(msg)) == 3
    assert codec.meta(wire.content) == fields
    back = codec.decode(wire.content)
    assert list(back) == list(payload)
    for k, v in payload.items():
        if isinstance(v, np.ndarray):
            assert back[k].dtype == np.float64 and back[k].shape == v.shape
            assert np.array_equal(bits(back[k]), bits(v)), k
            assert back[k].flags.writeable
        else:
            assert type(back[k]) is type(v), k                 # bool stays bool, int int
            assert np.array_equal(bits(np.float64(back[k])), bits(np.float64(v))), k
