"""zcor_synonyms_add and the operator's synonym groups (synonyms.json)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.errors import InvalidArgument, StateFileInvalid, StorageError, describe_os_error
from ...core.text import normalize
from .. import inputs as I
from .. import scope
from ..calls import Ctx, parse_args, synonym_terms

if TYPE_CHECKING:
    from ..parts import FlowRoom


BOT_TERMS = 10
"""Terms in one group the bot adds."""
BOT_TERM_CHARS = 32
BOT_TERM_WORDS = 4
"""Characters and words of one term the bot adds (a long multi-word term costs recall time
on every batch)."""


def _bot_limits(svc: FlowRoom, terms: list[str]) -> None:
    if len(terms) > BOT_TERMS:
        raise InvalidArgument(f"the bot may add groups of at most {BOT_TERMS} terms (got {len(terms)})",
                              field="terms")
    for t in terms:
        if len(t) > BOT_TERM_CHARS or len(t.split()) > BOT_TERM_WORDS:
            raise InvalidArgument(f"the bot may add terms of at most {BOT_TERM_CHARS} characters and "
                                  f"{BOT_TERM_WORDS} words; {t[:40]!r} is longer", field="terms")
    cap = svc.config.max_bot_synonym_groups
    if svc.synonyms.bot_count() >= cap:
        raise InvalidArgument(f"the bot has added {svc.synonyms.bot_count()} synonym groups, the limit "
                              f"(maxBotSynonymGroups is {cap}); an operator can add more", field="terms")


def add(svc: FlowRoom, a: I.SynonymsAddArgs, ctx: Ctx) -> dict[str, Any]:
    terms = synonym_terms(a)
    if scope.private_of(ctx, svc.config.private_scope) is not None:
        raise scope.refuse_shared("zcor_synonyms_add", "the synonym table", "terms")
    bot = ctx.actor == "model"
    held = False
    try:
        svc.synonyms.reload_if_changed()
        if bot:
            _bot_limits(svc, terms)
            added, held = svc.synonyms.add_bot_group(terms)
        else:
            added = svc.synonyms.add_group(terms)
            _accept_held(svc, terms)
        svc.retriever.teach_jieba()
    except OSError as e:
        raise StorageError(f"synonyms.json could not be saved ({describe_os_error(e)}); nothing changed.") \
            from None
    if added:
        ctx.committed = True
        ctx.changes = [{"kind": "synonyms.add", "before": None, "after": terms, **({"held": True} if held else {})}]
    cls = sorted(svc.synonyms.classes.of.get(normalize(terms[0]), frozenset([normalize(terms[0])])))
    return {"terms": terms, "added": added, "class": cls, **({"held": True} if held else {})}


def _accept_held(svc: FlowRoom, terms: list[str] | None) -> None:
    """An operator adding a group the bot's held list has accepts it: it leaves the list."""
    if not terms:
        return
    key = frozenset(normalize(t) for t in terms)
    held = svc.synonyms.bot["held"]
    rest = [g for g in held if frozenset(normalize(t) for t in g) != key]
    if len(rest) != len(held):
        svc.synonyms.bot = {**svc.synonyms.bot, "held": rest}
        svc.synonyms.replace_groups(svc.synonyms.groups)


def set_group(svc: FlowRoom, index: int | None, terms: list[str] | None,
                      actor: str = "operator") -> dict[str, Any]:
    """Operators' synonym editing: index None adds, terms None removes, both replace."""
    params = {"index": index, "terms": terms}

    def apply() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        try:
            svc.synonyms.reload_if_changed()  # a broken hand edit is never replaced by our copy
        except StateFileInvalid as e:
            raise StateFileInvalid(f"{e.message}; fix the file by hand first (it was left as it is)") from None
        groups = svc.synonyms.groups
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)
                                  or not 0 <= index < len(groups)):
            raise InvalidArgument(f"index must name an existing group (0..{len(groups) - 1})", field="index")
        clean = None
        if terms is not None:
            clean = synonym_terms(parse_args(I.SynonymsAddArgs, {"terms": terms}))
        if index is None and clean is None:
            raise InvalidArgument("give terms to add a group, or an index to change or remove one",
                                  field="terms")
        before = groups[index] if index is not None else None
        new = list(groups)
        if index is None:
            assert clean is not None  # refused above otherwise
            new.append(clean)
        elif clean is None:
            del new[index]
        else:
            new[index] = clean
        svc.synonyms.replace_groups(new)
        _accept_held(svc, clean)
        svc.retriever.teach_jieba()
        kind = "synonyms.add" if before is None else ("synonyms.remove" if clean is None else "synonyms.update")
        return {"groups": len(new)}, [{"kind": kind, "before": before, "after": clean}]

    return svc.calls.operate("zcor/synonyms/set", params, actor, apply, "synonyms.json")


HELD = "zcor/synonyms/held"


def _index_param(i: int | None, name: str, size: int, what: str) -> int:
    if i is None or not 0 <= i < size:
        raise InvalidArgument(f"{name} must name one of the {what} (0..{size - 1})" if size else
                              f"{name}: there are no {what}", field=name)
    return i


def held_action(svc: FlowRoom, params: Any, actor: str = "operator") -> dict[str, Any]:
    """`zcor/synonyms/held {action, held?, index?}`: the operator's decision on the bot's
    groups. accept (held): the held group joins the table as an operator's group, as
    `zcor/synonyms/set` would add it; discard (held): it is dropped; discard (index): the
    group at that index, one the bot added, is removed. Recorded in the operation log, refusals
    too: so the params model (inputs.SynonymsHeldParams) checks them inside the recorded call."""

    def apply() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        if not isinstance(params, dict):
            raise InvalidArgument("params must be an object {action, held?, index?}")
        a = parse_args(I.SynonymsHeldParams, params)
        action = a.action
        try:
            svc.synonyms.reload_if_changed()  # decide on what the file holds now
        except StateFileInvalid as e:
            raise StateFileInvalid(f"{e.message}; fix the file by hand first (it was left as it is)") from None
        syn = svc.synonyms
        if a.given("held"):
            i = _index_param(a.held, "held", len(syn.bot["held"]), "held groups")
            terms = syn.take_held(i, accept=action == "accept")
            change = {"kind": f"synonyms.{action}", "before": None if action == "accept" else terms,
                      "after": terms if action == "accept" else None, "from": "held"}
        else:
            mine = syn.bot_indexes()
            i = _index_param(a.index, "index", len(syn.groups), "groups")
            if i not in mine:
                raise InvalidArgument(f"group {i} was not added by the bot; change it with zcor/synonyms/set",
                                      field="index")
            terms = syn.discard_bot_group(i)
            change = {"kind": "synonyms.discard", "before": terms, "after": None, "from": "botAdded"}
        svc.retriever.teach_jieba()
        return {"action": action, "terms": terms, "groups": len(syn.groups), "held": len(syn.bot["held"])}, [change]

    return svc.calls.operate(HELD, params if isinstance(params, dict) else {"params": params}, actor, apply,
                       "synonyms.json")
