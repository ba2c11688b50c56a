"""Held asks (long polls) for Flower's polling APIs (flwr 1.42), in one process.

A deployed round is a chain of polls: each SuperNode asks the SuperLink for a message,
each SuperExec asks its SuperNode for a task, the ServerApp asks the SuperLink for the
replies.  An ask that finds nothing is answered at once, and the asker sleeps before it
asks again; every hop adds up to a poll interval, and shorter intervals cost CPU.

Here the answering side holds such an ask, for up to ``hold`` seconds, until what it
asks for is there in full, and answers then: no added latency, and an idle asker costs
one request per ``hold`` seconds.  The asker counts the time its ask took against its
own wait (:class:`constrfl.flower.warm.waits.ShortWaits`, the ServerApp's poll), so it asks
again at once after a held ask and as before against a stock server.

* :func:`hold_superlink` (in a SuperLink process): a SuperNode's ask for a message
  (Fleet ``PullMessages``) is held until a message for that node has been pushed by the
  ServerApp with all its objects; the ServerApp's ask for replies (``PullMessages`` of
  the ServerAppIo API) until a reply of its run has been pushed with all its objects.
  Asked only then, the asker pulls the objects at once instead of retrying for objects
  not pushed yet.
* :func:`hold_supernode` (in a SuperNode process): the SuperExec's ``AcquireTask`` is
  held until the SuperNode has stored a message (with its objects) from the SuperLink.

Each answers at once, as Flower does, once ``slots`` asks are held (a held ask occupies
a worker thread of the server).  The handlers stay Flower's own: each is wrapped where
its router looks it up (a module attribute), in this process only.
"""
from __future__ import annotations

import collections
import threading
import time

from . import pinned

__all__ = ["Arrivals", "Completion", "hold_superlink", "hold_supernode", "HOLD"]

#: seconds an ask is held at most (well inside flwr's 30 s request timeouts)
HOLD = 1.0


class Arrivals:
    """Things that arrive under a key (:meth:`arrived`) and asks that wait for their key
    (:meth:`held`): at most ``slots`` asks held at once, each for ``hold`` seconds."""

    def __init__(self, hold=HOLD, slots=16, clock=time.monotonic):
        self.hold, self.clock = float(hold), clock
        self._changed = threading.Condition()
        self._counts = collections.Counter()
        self._slots = threading.BoundedSemaphore(slots)

    def arrived(self, key=None):
        with self._changed:
            self._counts[key] += 1
            self._changed.notify_all()

    def held(self, ask, found, key=None):
        """``ask()`` again at each arrival under ``key`` until ``found(answer)`` or
        ``hold`` seconds have passed; its last answer.  Answered at once when every
        slot is taken."""
        if not self._slots.acquire(blocking=False):
            return ask()
        try:
            end = self.clock() + self.hold
            while True:
                with self._changed:
                    seen = self._counts[key]
                answer = ask()
                left = end - self.clock()
                if found(answer) or left <= 0:
                    return answer
                with self._changed:
                    self._changed.wait_for(lambda: self._counts[key] != seen, left)
        finally:
            self._slots.release()


class Completion:
    """Messages pushed to this server and the objects each still lacks (Flower pushes a
    message first, then each object it lacks in a request of its own): a message's key
    :meth:`Arrivals.arrived` once it lacks none.  Entries older than ``forget`` seconds
    (a push that never completed) are dropped."""

    def __init__(self, arrivals, forget=600.0, clock=time.monotonic):
        self.arrivals, self.forget, self.clock = arrivals, float(forget), clock
        self._lock = threading.Lock()
        self._lacks = {}                          # token -> (key, missing ids, since)
        self._wanted = collections.defaultdict(set)  # object id -> tokens
        self._tokens = 0

    def pushed(self, key, tree, to_push):
        """A message under ``key`` with object ``tree`` (flwr's ``ObjectTree``) was
        stored; the server asked for the objects ``to_push``."""
        lacks = _tree_ids(tree) & set(to_push)
        if not lacks:
            self.arrivals.arrived(key)
            return
        with self._lock:
            self._drop_old()
            self._tokens += 1
            self._lacks[self._tokens] = (key, lacks, self.clock())
            for object_id in lacks:
                self._wanted[object_id].add(self._tokens)

    def object_pushed(self, object_id):
        done = []
        with self._lock:
            for token in self._wanted.pop(object_id, ()):
                key, lacks, _ = self._lacks[token]
                lacks.discard(object_id)
                if not lacks:
                    del self._lacks[token]
                    done.append(key)
        for key in done:
            self.arrivals.arrived(key)

    def _drop_old(self):
        old = self.clock() - self.forget
        for token in [t for t, (_, _, since) in self._lacks.items() if since < old]:
            for object_id in self._lacks.pop(token)[1]:
                self._wanted[object_id].discard(token)
                if not self._wanted[object_id]:
                    del self._wanted[object_id]


def _tree_ids(tree):
    ids, todo = set(), [tree]
    while todo:
        node = todo.pop()
        ids.add(node.object_id)
        todo.extend(node.children)
    return ids


def _arg(args, kwargs, i, name):
    return args[i] if len(args) > i else kwargs[name]


def _after(effect):
    """A wrapper maker: the handler, then ``effect(answer, args, kwargs)``."""
    def make(handler):
        def wrapper(*args, **kwargs):
            answer = handler(*args, **kwargs)
            effect(answer, args, kwargs)
            return answer
        return wrapper
    return make


def _holding(arrivals, found, key_of):
    def make(handler):
        def holding(*args, **kwargs):
            return arrivals.held(lambda: handler(*args, **kwargs), found,
                                 key_of(args, kwargs))
        return holding
    return make


def _has_messages(answer):
    return len(answer.messages_list) > 0


def hold_superlink(hold=HOLD, slots=16):
    """In this SuperLink process, hold a SuperNode's ask for a message until one for it
    is there in full, and the ServerApp's ask for replies until one of its run is (each
    for up to ``hold`` s).  Returns the two :class:`Completion` trackers
    ``(messages, replies)``; None on an untested flwr (nothing held)."""
    if not pinned.tested():
        return None
    from flwr.superlink.servicer.fleet import fleet_handlers as fleet
    from flwr.superlink.servicer.runtime import runtime_handlers as runtime
    messages = Completion(Arrivals(hold, slots))     # keyed by destination node
    replies = Completion(Arrivals(hold, slots))      # keyed by run

    def messages_pushed(answer, args, kwargs):       # ServerAppIo PushMessages
        request = _arg(args, kwargs, 0, "request")
        for message, tree, stored in zip(request.messages_list,
                                         request.message_object_trees, answer.message_ids):
            if stored:
                messages.pushed(message.metadata.dst_node_id, tree, answer.objects_to_push)

    def replies_pushed(answer, args, kwargs):        # Fleet PushMessages
        request = _arg(args, kwargs, 0, "request")
        for message, tree in zip(request.messages_list, request.message_object_trees):
            replies.pushed(message.metadata.run_id, tree, answer.objects_to_push)

    def object_pushed(tracker):
        return lambda answer, args, kwargs: tracker.object_pushed(
            _arg(args, kwargs, 0, "request").object_id)

    pinned.wrap_once(runtime, "push_messages", _after(messages_pushed))
    pinned.wrap_once(runtime, "push_object", _after(object_pushed(messages)))
    pinned.wrap_once(fleet, "pull_messages", _holding(
        messages.arrivals, _has_messages,
        lambda args, kwargs: _arg(args, kwargs, 0, "request").node.node_id))
    pinned.wrap_once(fleet, "push_messages", _after(replies_pushed))
    pinned.wrap_once(fleet, "push_object", _after(object_pushed(replies)))
    pinned.wrap_once(runtime, "pull_messages", _holding(
        replies.arrivals, _has_messages,
        lambda args, kwargs: _arg(args, kwargs, 2, "task").run_id))
    return messages, replies


def hold_supernode(hold=HOLD, slots=16):
    """In this SuperNode process, hold the SuperExec's ask for a task until the
    SuperNode has stored a message from the SuperLink (for up to ``hold`` s).  Returns
    the :class:`Arrivals`; None on an untested flwr (nothing held)."""
    if not pinned.tested():
        return None
    from flwr.supernode import start_client_internal as loop
    from flwr.supernode.servicer.runtime import runtime_handlers as runtime
    tasks = Arrivals(hold, slots)

    def stored(run_id, args, kwargs):               # (None: no message pulled)
        if run_id is not None:
            tasks.arrived()

    pinned.wrap_once(loop, "_pull_and_store_message", _after(stored))
    pinned.wrap_once(runtime, "acquire_task", _holding(
        tasks, lambda answer: answer.HasField("task"), lambda args, kwargs: None))
    return tasks
