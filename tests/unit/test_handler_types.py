"""Seams carry their models (issue 35, item 2): every handler under ``engine/machines`` names what
it receives. A parameter ``rec``, ``effect``, ``msg`` or ``cmd`` is annotated, never with ``Any``;
the annotations resolve (``typing.get_type_hints``), so a misspelt or unimported name fails here
rather than going unnoticed under ``from __future__ import annotations``; and what they resolve to is
what the fold hands over: a journal record, an effect the journal stores, a seam model."""
from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import types
import typing
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import engine.machines
from engine.effects.models import Effect
from engine.machines import all_machines
from engine.seams import COMMANDS, MESSAGES, Message
from journal.records import Record

ROOT = Path(__file__).resolve().parents[2]
MACHINES = ROOT / "engine" / "machines"
TYPED = ("rec", "effect", "msg", "cmd")


def _mentions_any(annotation: ast.expr) -> bool:
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):   # a quoted annotation
        annotation = ast.parse(annotation.value, mode="eval").body
    return any((isinstance(n, ast.Name) and n.id == "Any") or (isinstance(n, ast.Attribute) and n.attr == "Any")
               for n in ast.walk(annotation))


def untyped_parameters(path: Path, root: Path = ROOT) -> Iterator[str]:
    """``file:line function(parameter)`` for each parameter named in ``TYPED`` that is unannotated
    or annotated with ``Any`` (alone or inside a union)."""
    tree = ast.parse(path.read_text(), str(path))
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = fn.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]:
            if arg.arg in TYPED and (arg.annotation is None or _mentions_any(arg.annotation)):
                what = "unannotated" if arg.annotation is None else ast.unparse(arg.annotation)
                yield f"{path.relative_to(root)}:{arg.lineno} {fn.name}({arg.arg}: {what})"


def test_no_handler_parameter_rec_effect_msg_or_cmd_is_untyped_or_any():
    found = [o for p in sorted(MACHINES.rglob("*.py")) for o in untyped_parameters(p)]
    assert found == [], "\n".join(found)


def test_the_scan_finds_an_any_and_a_missing_annotation(tmp_path):
    bad = tmp_path / "handlers.py"
    bad.write_text("def f(ctx, rec: Any, effect: 'Outcome | Any', msg, cmd: Command, other: Any): ...\n\n\n"
                   "async def g(ctx, *, cmd: typing.Any): ...\n")
    assert list(untyped_parameters(bad, tmp_path)) == [
        "handlers.py:1 f(rec: Any)",
        "handlers.py:1 f(effect: 'Outcome | Any')",
        "handlers.py:1 f(msg: unannotated)",
        "handlers.py:4 g(cmd: typing.Any)",
    ]


# -- the annotations resolve, to what the fold hands over ---------------------------------------

def _members(hint: Any) -> set[Any]:
    """The classes a resolved annotation admits (``X | Y``, ``Union``, ``Optional`` and
    ``Annotated`` opened); anything else is itself."""
    if typing.get_origin(hint) is typing.Annotated:
        return _members(typing.get_args(hint)[0])
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return set().union(*(_members(h) for h in typing.get_args(hint)))
    return {hint}


ADMITTED = {
    "rec": _members(Record),
    "effect": _members(Effect),
    "msg": _members(Message),
    "cmd": set(COMMANDS.values()),
}


def _modules() -> list[types.ModuleType]:
    all_machines()   # the machine modules first: a handler module imported alone may be mid-cycle
    names = sorted(m.name for m in pkgutil.walk_packages(engine.machines.__path__, "engine.machines."))
    return [importlib.import_module(n) for n in names]


def _functions() -> Iterator[tuple[str, Callable[..., Any]]]:
    """Every function and method defined in a module under ``engine/machines``."""
    for mod in _modules():
        for obj in vars(mod).values():
            if getattr(obj, "__module__", None) != mod.__name__:
                continue
            if inspect.isfunction(obj):
                yield f"{mod.__name__}.{obj.__qualname__}", obj
            elif inspect.isclass(obj):
                for f in vars(obj).values():
                    if inspect.isfunction(f):
                        yield f"{mod.__name__}.{f.__qualname__}", f


def _handlers() -> Iterator[tuple[str, Callable[..., Any]]]:
    """Every handler a machine's dispatch table names, the function each wrapper in it closes
    over (``pod.machine._op_outcome(create.created)``, ``session.machine._reply(...)``), and each
    machine's own ``on_*`` methods."""
    for m in all_machines():
        table = importlib.import_module(type(m).__module__).DISPATCH
        for _, _, handler in table.rows:
            yield f"{m.name}: {handler.__qualname__}", handler
            for cell in handler.__closure__ or ():
                if inspect.isfunction(cell.cell_contents):
                    yield f"{m.name}: {cell.cell_contents.__qualname__}", cell.cell_contents
        for name, f in inspect.getmembers(type(m), inspect.isfunction):
            if name.startswith("on_"):
                yield f"{m.name}: {f.__qualname__}", f


def _check(where: str, f: Callable[..., Any]) -> list[str]:
    try:
        hints = typing.get_type_hints(f)
    except Exception as exc:   # a name the annotation uses is not there
        return [f"{where}: annotations do not resolve: {exc!r}"]
    return [f"{where}: {p} admits {sorted(map(repr, _members(hints[p]) - ADMITTED[p]))}"
            for p in TYPED if p in hints and not _members(hints[p]) <= ADMITTED[p]]


def test_every_handler_of_every_dispatch_table_resolves_to_records_effects_and_seam_models():
    handlers = list(_handlers())
    assert len(handlers) > 80   # the three tables and what they wrap, not an empty walk
    wrong = [w for where, f in handlers for w in _check(where, f)]
    assert wrong == [], "\n".join(wrong)


def test_every_function_under_engine_machines_resolves_its_annotations():
    wrong = [w for where, f in _functions() for w in _check(where, f)]
    assert wrong == [], "\n".join(wrong)


@pytest.mark.parametrize("machine", all_machines(), ids=lambda m: m.name)
def test_a_machine_receives_exactly_the_messages_and_commands_the_seam_tables_give_it(machine):
    """``on_receive``'s ``msg`` is the union of ``MESSAGES`` for this machine, ``on_command``'s
    ``cmd`` the models of the commands it owns: a new message or command is typed where it lands."""
    received = _members(typing.get_type_hints(type(machine).on_receive)["msg"])
    assert received == {model for (to, _), model in MESSAGES.items() if to == machine.name}
    commanded = _members(typing.get_type_hints(type(machine).on_command)["cmd"])
    assert commanded == {COMMANDS[name] for name in machine.commands}
