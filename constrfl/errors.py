"""Exceptions that end a solve with a status instead of escaping ``cf.solve``.

They are raised inside the solvers (or by a party's evaluation methods) and caught once,
in :mod:`constrfl.api`, which turns them into a :class:`~constrfl.result.SolveResult`
with the matching status and everything computed so far.
"""
from __future__ import annotations

from . import status as st

__all__ = ["SolveStop", "PartyError", "ClientFailure", "NonFiniteIterate"]


class SolveStop(Exception):
    """A way out of a solve that is not an answer; ``status`` says which."""

    status = st.STOPPED

    def __init__(self, message, status=None):
        super().__init__(message)
        if status is not None:
            self.status = status


class PartyError(SolveStop):
    """A party's function failed at ``slot`` (``"objective"``, ``"constraints[0]"``, ...):
    it raised (``client_error``; the original exception is ``__cause__``), returned an
    output of the wrong shape or type (``client_error``) or a NaN/inf
    (``numerical_error``).  ``party`` is filled in by the runtime that ran the party."""

    def __init__(self, status, slot, reason, party=None):
        self.slot, self.reason, self.party = slot, reason, party
        super().__init__(self._text(), status)

    def _text(self):
        who = "a party" if self.party is None else (
            "the server" if self.party == "server" else f"client {self.party!r}")
        return f"{who}: {self.slot}: {self.reason}"

    def named(self, party):
        """This error with the party's name in its message."""
        self.party = party
        self.args = (self._text(),)
        return self


class ClientFailure(SolveStop):
    """A client did not answer (timeout, or its node went away) after the retries."""

    status = st.CLIENT_FAILURE

    def __init__(self, party, reason):
        self.party = party
        super().__init__(f"client {party!r} did not answer: {reason}")


class NonFiniteIterate(SolveStop):
    """The server's own arithmetic produced a NaN or inf (e.g. an overflowing step)."""

    status = st.NUMERICAL_ERROR
