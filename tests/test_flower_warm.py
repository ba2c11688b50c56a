"""constrfl's warm SuperExec and shortened waits (constrfl.flower.warm.superexec, .supernode,
.waits, .pinned), without sockets or a SuperNode.

A task of the example's ClientApp (its first message of a solve, captured on the
in-memory Grid) runs through flwr's own ``run_clientapp``, talking to an in-memory
stand-in for the SuperNode's Runtime API (``RuntimeHttpClient`` replaced in
``run_clientapp``'s module only): the reply it pushes is the one the ClientApp gives in
one process, bit for bit, in both task modes; the warm process survives the task with
its own exit handlers untouched.  On an untested flwr the commands say so and become
the stock ones.  The same reply as Flower's stock path (``flwr-clientapp`` processes)
end to end: tests/test_flower_warm_deploy.py (slow).
"""
import hashlib
import json
import os
import pickle
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("flwr")

from flwr.app import Context, RecordDict  # noqa: E402
from flwr.cli.build import build_fab_from_disk  # noqa: E402
from flwr.common.config import get_metadata_from_config, get_project_config  # noqa: E402
from flwr.common.serde import (context_to_proto, fab_to_proto, message_to_proto,  # noqa: E402
                               run_to_proto)
from flwr.proto import message_pb2, runtime_pb2  # noqa: E402
from flwr.supercore import exit as flwr_exit_module  # noqa: E402
from flwr.supercore import telemetry  # noqa: E402
from flwr.supercore.constant import TaskType  # noqa: E402
from flwr.supercore.exit import exit_handler  # noqa: E402
from flwr.supercore.fab import Fab  # noqa: E402
from flwr.supercore.inflatable.inflatable_object import (get_all_nested_objects,  # noqa: E402
                                                          get_object_tree,
                                                          iterate_object_tree)
from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents  # noqa: E402
from flwr.supercore.run import Run  # noqa: E402
from flwr.supercore.superexec.executor import ExecutionSpec, SubprocessExecutor  # noqa: E402
from flwr.supernode.runtime import run_clientapp as runtime  # noqa: E402

from constrfl.flower import codec  # noqa: E402
from constrfl.flower.warm import (holds, pinned, scoped, superexec, superlink,  # noqa: E402
                                  supernode, waits)
from test_flower_example import EXAMPLE, from_example, solve_in_memory  # noqa: E402


class FakeRuntime:
    """The SuperNode's Runtime API for one task, in memory: hands out the task's
    message, context, run and FAB; keeps what the ClientApp pushes.  ``out``: a file
    the pushed reply and task output are also written to (a forked child's)."""

    def __init__(self, message, context, run, fab, out):
        message.metadata.__dict__["_message_id"] = message.object_id
        self.tree = get_object_tree(message)
        self.objects = {i: o.deflate() for i, o in get_all_nested_objects(message).items()}
        self.proto = message_to_proto(message)
        self.task = runtime_pb2.PullTaskInputResponse(
            context=context_to_proto(context), run=run_to_proto(run), fab=fab_to_proto(fab),
            task_id=7)
        self.out, self.pushed = out, {"objects": {}}

    @classmethod
    def serving(cls, fake):
        class Client:                       # RuntimeHttpClient, as run_clientapp builds it
            @staticmethod
            def from_server_address(**kwargs):
                return fake
        return Client

    def _keep(self):
        self.out.write_bytes(pickle.dumps(self.pushed))

    def SendTaskHeartbeat(self, req):
        self.pushed["heartbeats"] = self.pushed.get("heartbeats", 0) + 1
        self._keep()
        return runtime_pb2.SendTaskHeartbeatResponse(success=True)

    def PullTaskInput(self, req):
        return self.task

    def PullMessages(self, req):
        return runtime_pb2.PullAppMessagesResponse(messages_list=[self.proto],
                                                   message_object_trees=[self.tree])

    def PullObject(self, req):
        found = req.object_id in self.objects
        return message_pb2.PullObjectResponse(object_found=found, object_available=found,
                                              object_content=self.objects.get(req.object_id))

    def ConfirmMessageReceived(self, req):
        return message_pb2.ConfirmMessageReceivedResponse()

    def PushMessages(self, req):
        self.pushed["message"] = req.messages_list[0].SerializeToString()
        self.pushed["tree"] = req.message_object_trees[0].SerializeToString()
        ids = [t.object_id for t in iterate_object_tree(req.message_object_trees[0])]
        return runtime_pb2.PushAppMessagesResponse(objects_to_push=ids, session_id="s")

    def PushObject(self, req):
        self.pushed["objects"][req.object_id] = req.object_content
        self._keep()
        return message_pb2.PushObjectResponse(stored=True)

    def PushTaskOutput(self, req):
        self.pushed["status"] = (req.sub_status, req.details)
        self._keep()
        return runtime_pb2.PushTaskOutputResponse()

    def close(self):
        pass


def reply_of(pushed):
    """The reply message run_clientapp pushed (inflated from its objects)."""
    tree = message_pb2.ObjectTree.FromString(pushed["tree"])
    return inflate_object_from_contents(tree.object_id, pushed["objects"])


@pytest.fixture(scope="module")
def task_input(tmp_path_factory):
    """The example's first message to site-0 in a solve, the site's context, the run and
    the example's FAB, and the reply the ClientApp gives to it in this process."""
    tmp = tmp_path_factory.mktemp("warm")
    example = from_example("split_data", "npapp.client_app", "npapp.server_app",
                           "npapp.task")
    seen = []

    def first(site, node, message):
        if site == "site-0" and codec.meta(message.content).get("seq") == 1 and not seen:
            seen.append(message)
    with pytest.raises(RuntimeError, match="ended max_iterations"):   # (one outer
        solve_in_memory(example, tmp, 3, faults=first,                      # iteration;
                        **{"max-outer": 1, "secure": False})   # message 1: a solver's)
    message = seen[0]
    run_config = json.loads((tmp / "result" / "run_config.json").read_text())

    def context(state_dir):
        return Context(run_id=5, node_id=message.metadata.dst_node_id,
                       node_config={"site": "site-0", "data": str(tmp / "sites" / "site-0.csv"),
                                    "state-dir": str(state_dir)},
                       state=RecordDict(), run_config=run_config)
    expected = example[1].app(message, context(tmp / "expected-state"))
    fab_id, fab_version = get_metadata_from_config(get_project_config(EXAMPLE))
    content = build_fab_from_disk(EXAMPLE)
    fab = Fab(hashlib.sha256(content).hexdigest(), content, {})
    run = Run.create_empty(5)
    run.fab_id, run.fab_version, run.fab_hash = fab_id, fab_version, fab.hash_str
    return message, context, run, fab, expected, tmp


def spec(task_type=TaskType.CLIENT_APP):
    return ExecutionSpec(task_type=task_type, runtime_api_address="127.0.0.1:1",
                         token="token", insecure=True, root_certificates_path=None,
                         runtime_dependency_install=False, parent_pid=os.getpid(),
                         suppress_output=False, task_id=7)


@pytest.mark.parametrize("mode", superexec.MODES)
def test_a_task_runs_through_run_clientapp_with_the_clientapps_own_reply(
        task_input, tmp_path, monkeypatch, mode):
    message, context, run, fab, expected, _ = task_input
    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "flwr-home"))
    monkeypatch.setattr(telemetry, "FLWR_TELEMETRY_ENABLED", "0")   # run_clientapp's event
    fake = FakeRuntime(message, context(tmp_path / f"state-{mode}"), run, fab,
                       tmp_path / "pushed.pkl")
    monkeypatch.setattr(runtime, "RuntimeHttpClient", FakeRuntime.serving(fake))
    own = list(exit_handler.registered_exit_handlers)       # the SuperExec's
    stock = SubprocessExecutor()
    executor = superexec.WarmExecutor(stock, mode)
    assert executor.launch(spec()).status == "accepted"
    end = time.monotonic() + 60
    while executor.children and time.monotonic() < end:      # (fork: reap the child)
        executor.reconcile()
        time.sleep(0.02)
    assert executor.codes == [0]
    pushed = pickle.loads((tmp_path / "pushed.pkl").read_bytes())
    assert pushed["status"] == ("completed", "")
    assert "heartbeats" not in pushed                      # the first is an interval in
    got = reply_of(pushed)
    assert codec.meta(got.content) == codec.meta(expected.content)
    a, b = codec.decode(got.content), codec.decode(expected.content)
    assert sorted(a) == sorted(b)
    for key in a:
        assert (a[key].tobytes() == b[key].tobytes() if hasattr(a[key], "tobytes")
                else a[key] == b[key]), key
    # the warm process is intact: flwr's exit machinery untouched, still in this process
    assert exit_handler.registered_exit_handlers == own
    assert runtime.flwr_exit is flwr_exit_module.flwr_exit
    assert os.getpid() == executor.pid
    # the FAB flwr installed is remembered for the next task, and forgotten at the end
    (marker,) = executor.installs.root.iterdir()
    assert marker.name == hashlib.sha256(fab.content).hexdigest()
    assert Path(marker.read_text()).is_dir()
    executor.close()
    assert not executor.installs.root.exists()


def test_a_fab_installed_once_is_not_extracted_again(tmp_path):
    calls = []

    def install(fab_file, install_dir=None, skip_prompt=False):
        calls.append(fab_file)
        path = tmp_path / f"app-{len(calls)}"
        path.mkdir()
        return path
    once = superexec.InstallOnce(tmp_path).wrap(install)
    assert once(b"fab", skip_prompt=True) == tmp_path / "app-1"
    assert once(b"fab", skip_prompt=True) == tmp_path / "app-1"      # remembered
    assert once(b"other", skip_prompt=True) == tmp_path / "app-2"
    (tmp_path / "app-1").rmdir()                                      # gone: again
    assert once(b"fab", skip_prompt=True) == tmp_path / "app-3"
    once(b"fab")                                                      # flwr's prompt
    once(Path("x.fab"), skip_prompt=True)                             # not bytes
    assert calls == [b"fab", b"other", b"fab", b"fab", Path("x.fab")]


def test_a_tasks_first_heartbeat_is_skipped_and_the_supernode_still_counts_it_alive():
    sent = []
    beat = superexec.first_beat_later(lambda client: lambda: sent.append(client) or True)("c")
    assert beat() is True and sent == []
    assert beat() is True and beat() is True and sent == ["c", "c"]
    # flwr's HeartbeatSender beats again after at most (30 - 5)·0.9 s; a claimed task is
    # alive for 30 s, a started one for 2·30 s (claim_task, activate_task)
    from flwr.common import constant as c
    later = (c.HEARTBEAT_DEFAULT_INTERVAL - c.HEARTBEAT_CALL_TIMEOUT) * (
        c.HEARTBEAT_BASE_MULTIPLIER + max(c.HEARTBEAT_RANDOM_RANGE))
    assert later < c.HEARTBEAT_DEFAULT_INTERVAL <= c.HEARTBEAT_PATIENCE * c.HEARTBEAT_DEFAULT_INTERVAL


def test_other_task_types_go_to_flowers_executor():
    class Stock(SubprocessExecutor):
        def launch(self, spec):
            self.launched = spec.task_type
            return "stock"
    stock = Stock()
    assert superexec.WarmExecutor(stock).launch(spec(TaskType.SERVER_APP)) == "stock"
    assert stock.launched == TaskType.SERVER_APP


def test_an_untested_flwr_runs_the_stock_commands_with_a_clear_message(monkeypatch, capsys):
    became = []
    monkeypatch.setattr(pinned, "installed", lambda: "1.99.0")
    monkeypatch.setattr(pinned.os, "execvp", lambda exe, argv: became.append(argv))
    args = ["--insecure", "--runtime-api-address", "127.0.0.1:9094"]
    superexec.main(["--task-mode", "in-process", *args])
    supernode.main(["--idle-wait", "0.1", "--insecure", "--superlink", "127.0.0.1:9092"])
    superlink.main(["--hold", "2", "--insecure"])
    assert became == [["flower-superexec", *args],
                      ["flower-supernode", "--insecure", "--superlink", "127.0.0.1:9092"],
                      ["flower-superlink", "--insecure"]]
    err = capsys.readouterr().err
    assert ("constrfl.flower.warm.superexec was tested with flwr 1.42.x only and flwr 1.99.0 is "
            "installed: running Flower's own `flower-superexec` instead") in err
    assert "running Flower's own `flower-supernode` instead" in err
    assert "running Flower's own `flower-superlink` instead" in err
    assert holds.hold_superlink() is None and holds.hold_supernode() is None
    assert scoped.scope_superlink_middleware() is False
    assert waits.shorten_object_pulls() is False and waits.adapt_task_polls() is None
    assert "Flower's fixed waits kept (flwr 1.99.0" in capsys.readouterr().err


def test_tested_versions():
    assert pinned.tested("1.42.0") and pinned.tested("1.42.7")
    assert not pinned.tested("1.41.0") and not pinned.tested("1.43.0")
    assert pinned.untested("constrfl.flower.warm.superexec", "1.42.3") is None


def test_the_supernodes_waits_are_quick_while_messages_come_then_flwrs():
    now = [0.0]
    slept = []

    class Clock:                          # (no time passes between the sleeps)
        @staticmethod
        def sleep(s):
            slept.append(s)

        @staticmethod
        def monotonic():
            return 0.0
    idle = waits.Backoff(0.05, window=5.0, clock=lambda: now[0])
    clock = waits.ShortWaits(idle, 0.01, clock=Clock)
    clock.sleep(3)                        # a message came less than 5 s ago: quick
    clock.sleep(0.5)                      # a reply awaited: 0.01, and counts as work
    now[0] = 4.9
    clock.sleep(3)
    now[0] = 6.0                          # nothing for 5 s: doubling up to flwr's 3 s
    for _ in range(8):
        clock.sleep(3)
    clock.sleep(0.2)                      # any other wait: unchanged
    assert slept == [0.05, 0.01, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.0, 3.0, 3.0, 0.2]


def test_a_wait_counts_the_ask_before_it():
    """After an ask held 1 s by a holding server the loop asks again at once; after a
    quick answer it waits the rest of its interval."""
    t = [0.0]
    slept = []

    class Clock:
        @staticmethod
        def sleep(s):
            slept.append(s)
            t[0] += s

        @staticmethod
        def monotonic():
            return t[0]
    clock = waits.ShortWaits(waits.Backoff(0.2, clock=lambda: 0.0), 0.01, clock=Clock)
    t[0] += 1.0                           # a held ask
    clock.sleep(3)
    t[0] += 0.05                          # a quick empty answer
    clock.sleep(3)
    assert slept == [0.0, pytest.approx(0.15)]


def test_object_pulls_shortened_in_this_process_only(monkeypatch):
    from flwr.supercore.inflatable import inflatable_utils as pulls
    for fn in (pulls.pull_objects, pulls.pull_and_inflate_object_from_tree):
        monkeypatch.setattr(fn, "__kwdefaults__", dict(fn.__kwdefaults__))
    assert waits.shorten_object_pulls(0.02, max_time=30)
    for fn in (pulls.pull_objects, pulls.pull_and_inflate_object_from_tree):
        kw = fn.__kwdefaults__
        assert (kw["initial_backoff"], kw["backoff_cap"], kw["max_time"]) == (0.02, 1.0, 30)
    assert sys.modules["flwr.supercore.constant"].PULL_INITIAL_BACKOFF == 1
