"""A party's side of every algorithm: the handlers of the protocol's messages
(:mod:`.admm`; moved from ``constrfl.federation.handlers``)."""
from .admm import (CORRECTION_NAMES, CORRECTIONS, HANDLERS, Site, dispatch, init_state,
                   penalized_grad)

__all__ = ["Site", "HANDLERS", "dispatch", "init_state", "CORRECTIONS", "CORRECTION_NAMES",
           "penalized_grad"]
