"""constrfl's warm Flower runtime: commands that run a deployment at a fraction of a
second a round where Flower's stock commands take several (docs/flower.md, "The warm
path").

* ``python -m constrfl.flower.warm.superlink`` — Flower's SuperLink, its asks held
  until there is an answer (:mod:`.holds`), its API-specific middlewares on their own
  API (:mod:`.scoped`);
* ``python -m constrfl.flower.warm.supernode`` — Flower's SuperNode with its fixed
  waits shortened (:mod:`.waits`) and its task asks held;
* ``python -m constrfl.flower.warm.superexec`` — one warm process per site that forks a
  child per message (:mod:`.superexec`).

Unlike the rest of :mod:`constrfl.flower`, which uses only Flower's public modules
(``flwr.app``, ``flwr.clientapp``, ``flwr.serverapp``, ``flwr.simulation``), these
commands replace functions inside flwr's own runtime: they are pinned to the flwr minor
versions they were tested with (:data:`.pinned.TESTED`) and on any other run Flower's
stock command instead (:mod:`.pinned`).  Nothing here is imported by the ServerApp,
the ClientApp or :func:`constrfl.flower.simulate`.
"""
