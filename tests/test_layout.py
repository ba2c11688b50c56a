"""The package's layout (issue 23), read from the source with ``ast``: every import
statement, at module level or inside a function, is an edge of the import graph.

* the graph has no cycle;
* the solvers (the server's side) reach the parties only through messages: no module
  of ``constrfl/solvers/`` imports the party side (``constrfl.parties``, the removed
  ``constrfl.federation.handlers``, a party runtime or backend) or holds a client object;
* ``constrfl/federation/`` is the transport: it imports nothing from the solvers, and
  from the party side only the registry hook (the names of ``constrfl.parties``);
* no module keeps hidden state (weak-reference or memoizing caches);
* the math both sides share (:mod:`constrfl.corrections`) is a leaf.

Importing a submodule also runs its packages' ``__init__``: the package graph (each
module importing its enclosing packages too) has no cycle either.  The messages, which
both sides speak, are a module of their own (:mod:`constrfl.messages`), so the party
side never enters the transport's package.
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "constrfl"


def _name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in PACKAGE.rglob("*.py")}
TREES = {m: ast.parse(p.read_text(encoding="utf-8"), str(p)) for m, p in MODULES.items()}


def _known(name):
    """``name`` or the closest enclosing module of the package (None outside it)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module):
    """``[(imported module, names taken from it)]`` of every import statement of
    ``module`` (module level and inside functions), within the package."""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.Import):
            out += [(_known(a.name), ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            for a in node.names:
                sub = f"{source}.{a.name}"
                out.append((sub, ()) if sub in MODULES else (_known(source), (a.name,)))
    return [(m, names) for m, names in out if m and m != module]


GRAPH = {m: {target for target, _ in imports(m)} for m in MODULES}


def cycles(graph):
    """The graph's strongly connected components of more than one module, and its
    modules that import themselves (Tarjan, iteratively)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1 or v in graph[v]:
                        found.append(sorted(component))
    return found


def within(package):
    return [m for m in MODULES if m == package or m.startswith(package + ".")]


def test_the_scan_sees_the_imports():
    """The graph has the edges the layout is about (so an empty answer means none)."""
    assert "constrfl.parties" in GRAPH["constrfl.federation.runtime"]
    assert "constrfl.corrections" in GRAPH["constrfl.solvers.baselines"]
    assert "constrfl.messages" in GRAPH["constrfl.parties.admm"]
    assert "constrfl.parties" in PACKAGE_GRAPH["constrfl.federation.inprocess"]
    assert "constrfl.estimators" in GRAPH["constrfl"]          # inside a function
    assert {"constrfl.parties.al", "constrfl.parties.admm"} <= GRAPH["constrfl.parties"]


def test_the_import_graph_has_no_cycle():
    assert cycles(GRAPH) == []


def _with_packages(graph):
    """Each module also imports what its enclosing packages' ``__init__`` import (Python
    runs them first); a package's edges to its own modules are its re-exports."""
    def packages(m):
        parts = m.split(".")
        return [".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i])
                in graph]
    out = {m: set(targets) for m, targets in graph.items()}
    for m, targets in graph.items():
        for t in targets:                    # importing t runs t's packages first
            out[m].update(p for p in packages(t) if p != m and not m.startswith(p + "."))
    return out


PACKAGE_GRAPH = _with_packages(GRAPH)


def test_a_loop_through_a_package_is_found():
    """The layout before constrfl.messages: the transport's package re-exported a backend
    that reached the parties, whose handlers imported the transport's messages."""
    old = {"fed": {"fed.inprocess"}, "fed.inprocess": {"parties.admm"},
           "parties": {"parties.admm"}, "parties.admm": {"fed.messages"},
           "fed.messages": set()}
    assert cycles(old) == []
    assert cycles(_with_packages(old)) == [["fed", "fed.inprocess", "parties", "parties.admm"]]


def test_the_package_graph_has_no_cycle():
    """No loop through a package's ``__init__`` (constrfl itself, which imports the
    public API, is left out: every module sits inside it)."""
    graph = {m: {t for t in ts if t != "constrfl"} for m, ts in PACKAGE_GRAPH.items()
             if m != "constrfl"}
    assert cycles(graph) == []


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}}) == [["a"]] and cycles({"a": {"b"}, "b": set()}) == []


PARTY_SIDE = ("constrfl.parties", "constrfl.federation.handlers",
              "constrfl.federation.runtime", "constrfl.federation.inprocess")
CLIENT_OBJECTS = {"Client", "PartyContext", "PartyRuntime", "InProcessFederation"}


@pytest.mark.parametrize("module", within("constrfl.solvers"))
def test_a_solver_reaches_the_parties_only_through_messages(module):
    for target, names in imports(module):
        assert not any(target == p or target.startswith(p + ".") for p in PARTY_SIDE), \
            f"{module} imports {target}"
        assert not CLIENT_OBJECTS & set(names), f"{module} imports {names} from {target}"
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.Attribute):
            assert node.attr not in ("runtimes", "ctx"), f"{module}: .{node.attr}"
            assert not (node.attr == "clients" and isinstance(node.value, ast.Name)
                        and node.value.id == "problem"), f"{module}: problem.clients"


@pytest.mark.parametrize("module", within("constrfl.federation"))
def test_the_federation_is_transport(module):
    """Nothing from the solvers; from the party side only the names of its package
    (the registry hook), which exports them."""
    import constrfl.parties
    for target, names in imports(module):
        assert not target.startswith("constrfl.solvers"), f"{module} imports {target}"
        if target.startswith("constrfl.parties"):
            assert target == "constrfl.parties", f"{module} imports {target}"
            assert set(names) <= set(constrfl.parties.__all__), names


def test_only_the_transport_reaches_the_party_side():
    users = {m for m in MODULES if not m.startswith("constrfl.parties")
             for target, _ in imports(m) if target.startswith("constrfl.parties")}
    assert users and all(m.startswith(("constrfl.federation.", "constrfl.flower."))
                         for m in users), sorted(users)


def hidden_state(tree):
    """What in ``tree`` keeps state across calls at module level: a ``weakref`` import or
    a memoizing decorator (``lru_cache``, ``cache``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found += [n for n in [a.name for a in node.names] + [getattr(node, "module", None)]
                      if n == "weakref"]
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found += [ast.unparse(d) for d in node.decorator_list
                      if ast.unparse(d).split("(")[0].rpartition(".")[2] in ("lru_cache", "cache")]
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_hidden_module_state(module):
    """What a party derives for a solve lives on its context (constrfl.parties.PartyContext),
    what a solve derives on its state: no module keeps caches."""
    assert hidden_state(TREES[module]) == [], module


def test_hidden_state_is_found():
    tree = ast.parse("import weakref\n@functools.lru_cache(8)\ndef f(): pass\n"
                     "@cache\ndef g(): pass\n")
    assert hidden_state(tree) == ["weakref", "functools.lru_cache(8)", "cache"]


def test_the_shared_math_is_a_leaf():
    assert GRAPH["constrfl.corrections"] == set()
    assert "constrfl.corrections" in GRAPH["constrfl.parties.baselines"]
    assert "constrfl.corrections" in GRAPH["constrfl.settings"]


def test_every_message_type_has_its_handler():
    """Every solver message has a party handler; the secure sum's key agreement is the
    transport's, answered by the runtime (constrfl.federation.runtime)."""
    from constrfl.messages import MessageType
    from constrfl.parties import HANDLERS
    types = {v for k, v in vars(MessageType).items() if k.isupper()}
    assert set(HANDLERS) == types - {MessageType.SECURE_KEYS}


def test_no_name_of_the_package_hides_one_of_its_modules():
    """``constrfl.<module>.<name>`` works as written for every module: no function or
    class of the package's namespace carries a module's name (``cf.kkt`` the function
    hid ``constrfl.kkt`` the module, and the README's ``constrfl.kkt.estimate_multipliers``
    raised AttributeError)."""
    import importlib
    import pkgutil
    import constrfl
    for info in pkgutil.iter_modules(constrfl.__path__):
        if info.name in ("__main__", "flower"):       # a script; an extra
            continue
        module = importlib.import_module(f"constrfl.{info.name}")
        assert getattr(constrfl, info.name) is module, info.name
    assert callable(constrfl.residuals.estimate_multipliers)
    assert callable(constrfl.groundtruth.pooled_cvxpy)


@pytest.mark.parametrize("module", within("constrfl.parties"))
def test_the_parties_reach_the_server_side_only_through_messages(module):
    """The party side imports nothing of the solvers: the math both sides use (the AL
    term, the local solvers, the ADMM block's constants) lives in modules of its own."""
    for target, _ in imports(module):
        assert not target.startswith("constrfl.solvers"), f"{module} imports {target}"


@pytest.mark.parametrize("module", ["constrfl.augmented", "constrfl.local", "constrfl.block",
                                    "constrfl.corrections"])
def test_the_math_both_sides_use_imports_neither_side(module):
    sides = ("constrfl.solvers", "constrfl.parties", "constrfl.federation", "constrfl.flower")
    assert not any(t.startswith(sides) for t in GRAPH[module]), sorted(GRAPH[module])
