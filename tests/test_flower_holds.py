"""Held asks (constrfl.flower.warm.holds): an ask is answered when what it asks for is there
in full, or after ``hold`` seconds, never later; other keys' arrivals do not answer it;
with every slot taken it is answered at once.  The wrappers sit where flwr 1.42's
routers look the handlers up, with flwr's own request and response messages (the
handlers themselves stood in for).  End to end: validation/flower_deploy.py."""
import threading
import time

import pytest

pytest.importorskip("flwr")

from flwr.proto import fleet_pb2, message_pb2, node_pb2, runtime_pb2, task_pb2  # noqa: E402
from flwr.superlink.servicer.fleet import fleet_handlers as fleet  # noqa: E402
from flwr.superlink.servicer.runtime import runtime_handlers as link_runtime  # noqa: E402
from flwr.supernode import start_client_internal as node_loop  # noqa: E402
from flwr.supernode.servicer.runtime import runtime_handlers as node_runtime  # noqa: E402

from constrfl.flower.warm import holds  # noqa: E402


def later(seconds, fn, *args):
    timer = threading.Timer(seconds, fn, args)
    timer.start()
    return timer


class Asked:
    """A result of an ask run in a thread: the answer and when it came."""

    def __init__(self, ask):
        self.answer, self.t0, self.took = None, time.monotonic(), None
        self.thread = threading.Thread(target=self._run, args=(ask,))
        self.thread.start()

    def _run(self, ask):
        self.answer = ask()
        self.took = time.monotonic() - self.t0

    def result(self, timeout=10.0):
        self.thread.join(timeout)
        assert not self.thread.is_alive()
        return self.answer


def test_an_ask_is_answered_when_its_key_arrives_and_not_before():
    arrivals, box = holds.Arrivals(hold=10.0), {}
    asks = []

    def ask():
        asks.append(box.get("a"))
        return box.get("a")
    asked = Asked(lambda: arrivals.held(ask, lambda v: v is not None, key="a"))
    time.sleep(0.05)
    box["b"] = 1
    arrivals.arrived("b")                 # another key: not asked again
    time.sleep(0.05)
    assert asks == [None] and asked.thread.is_alive()
    box["a"] = 7
    arrivals.arrived("a")
    assert asked.result() == 7 and asked.took < 5.0 and asks == [None, 7]


def test_an_ask_ends_after_hold_seconds_with_the_last_answer():
    arrivals = holds.Arrivals(hold=0.05)
    t0 = time.monotonic()
    assert arrivals.held(lambda: "nothing", lambda v: False) == "nothing"
    assert 0.04 <= time.monotonic() - t0 < 5.0


def test_an_answer_there_already_is_not_held():
    arrivals = holds.Arrivals(hold=10.0)
    t0 = time.monotonic()
    assert arrivals.held(lambda: 3, lambda v: True) == 3
    assert time.monotonic() - t0 < 1.0


def test_with_every_slot_taken_an_ask_is_answered_at_once():
    arrivals, box = holds.Arrivals(hold=10.0, slots=1), {}
    first = Asked(lambda: arrivals.held(lambda: box.get("v"), lambda v: v is not None))
    time.sleep(0.05)
    t0 = time.monotonic()
    assert arrivals.held(lambda: "now", lambda v: False) == "now"
    assert time.monotonic() - t0 < 1.0
    box["v"] = 1
    arrivals.arrived()
    assert first.result() == 1


def tree(object_id, *children):
    return message_pb2.ObjectTree(object_id=object_id, children=list(children))


def test_a_message_arrives_once_it_lacks_no_object():
    arrived = []

    class Log:
        def arrived(self, key):
            arrived.append(key)
    done = holds.Completion(Log())
    done.pushed(5, tree("m", tree("r", tree("c"))), ["r", "c", "x"])
    done.pushed(6, tree("n", tree("r")), ["r"])          # an object two messages share
    done.pushed(7, tree("o"), [])                         # nothing to push: there already
    assert arrived == [7]
    done.object_pushed("r")
    assert arrived == [7, 6]
    done.object_pushed("x")                               # not part of any tree
    done.object_pushed("c")
    assert arrived == [7, 6, 5]


def test_a_push_that_never_completes_is_forgotten():
    now, arrived = [0.0], []

    class Log:
        def arrived(self, key):
            arrived.append(key)
    done = holds.Completion(Log(), forget=60.0, clock=lambda: now[0])
    done.pushed(5, tree("m"), ["m"])
    now[0] = 61.0
    done.pushed(6, tree("n"), ["n"])      # drops the push of 5, older than 60 s
    done.object_pushed("m")
    done.object_pushed("n")
    assert arrived == [6]


def test_flwrs_routers_look_the_handlers_up_where_they_are_wrapped():
    from flwr.superlink import main as link_main
    from flwr.superlink.routers.fleet import router as fleet_router
    from flwr.supernode import main as node_main
    assert fleet_router.fleet_handlers is fleet
    assert link_main._RUNTIME_HANDLERS is link_runtime
    assert node_main._RUNTIME_HANDLERS is node_runtime


def message(dst, run=1):
    return message_pb2.Message(metadata=message_pb2.Metadata(run_id=run, dst_node_id=dst))


def test_the_superlink_answers_a_node_once_its_message_is_there_in_full(monkeypatch):
    """ServerApp pushes a message for node 5 (objects m, c), the node's held ask is
    answered after the last object; the ServerApp's held ask for replies likewise."""
    stored = {"ins": [], "res": []}

    def push_messages(request, state, task):
        stored["ins"] += list(request.messages_list)
        return runtime_pb2.PushAppMessagesResponse(message_ids=["m"], objects_to_push=["m", "c"])

    def pull_messages(request, state, store):
        mine = [m for m in stored["ins"] if m.metadata.dst_node_id == request.node.node_id]
        return fleet_pb2.PullMessagesResponse(messages_list=mine)

    def push_replies(request, state):
        stored["res"] += list(request.messages_list)
        return fleet_pb2.PushMessagesResponse(objects_to_push=["r"])

    def pull_replies(request, state, task):
        return runtime_pb2.PullAppMessagesResponse(messages_list=stored["res"])

    for module, name, fn in [(link_runtime, "push_messages", push_messages),
                             (link_runtime, "push_object", lambda *a, **k: None),
                             (fleet, "pull_messages", pull_messages),
                             (fleet, "push_messages", push_replies),
                             (fleet, "push_object", lambda *a, **k: None),
                             (link_runtime, "pull_messages", pull_replies)]:
        monkeypatch.setattr(module, name, fn)
    holds.hold_superlink(hold=10.0)
    node = node_pb2.Node(node_id=5)
    ask = Asked(lambda: fleet.pull_messages(
        request=fleet_pb2.PullMessagesRequest(node=node), state=None, store=None))
    link_runtime.push_messages(runtime_pb2.PushAppMessagesRequest(
        messages_list=[message(5)], message_object_trees=[tree("m", tree("c"))]), None, None)
    link_runtime.push_object(message_pb2.PushObjectRequest(object_id="m"), None, None)
    time.sleep(0.05)
    assert ask.thread.is_alive()          # stored, but c not pushed yet
    link_runtime.push_object(message_pb2.PushObjectRequest(object_id="c"), None, None)
    assert len(ask.result().messages_list) == 1

    task = task_pb2.Task(run_id=1)
    replies = Asked(lambda: link_runtime.pull_messages(
        runtime_pb2.PullAppMessagesRequest(), None, task))
    fleet.push_messages(request=fleet_pb2.PushMessagesRequest(
        node=node, messages_list=[message(0)], message_object_trees=[tree("r")]), state=None)
    time.sleep(0.05)
    assert replies.thread.is_alive()
    fleet.push_object(request=message_pb2.PushObjectRequest(object_id="r"), state=None)
    assert len(replies.result().messages_list) == 1


def test_the_supernode_hands_out_a_task_once_it_has_stored_a_message(monkeypatch):
    tasks = []
    monkeypatch.setattr(node_loop, "_pull_and_store_message",
                        lambda **kw: tasks.append(task_pb2.Task(task_id=3)) or 1)
    monkeypatch.setattr(node_runtime, "acquire_task", lambda request, state: (
        runtime_pb2.AcquireTaskResponse(task=tasks[0], token="t") if tasks
        else runtime_pb2.AcquireTaskResponse()))
    holds.hold_supernode(hold=10.0)
    ask = Asked(lambda: node_runtime.acquire_task(runtime_pb2.AcquireTaskRequest(), None))
    time.sleep(0.05)
    assert ask.thread.is_alive()
    later(0.0, node_loop._pull_and_store_message)
    answer = ask.result()
    assert answer.HasField("task") and answer.task.task_id == 3 and ask.took < 5.0
