"""zcor_synonyms_add and the operator's synonym groups (synonyms.json)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.errors import InvalidArgument, StateFileInvalid, StorageError, describe_os_error
from ...core.text import normalize
from .. import inputs as I
from ..calls import Ctx, parse_args, synonym_terms

if TYPE_CHECKING:
    from ..service import Service


def add(svc: Service, a: I.SynonymsAddArgs, ctx: Ctx) -> dict[str, Any]:
    terms = synonym_terms(a)
    try:
        svc.synonyms.reload_if_changed()
        added = svc.synonyms.add_group(terms)
        svc.retriever.teach_jieba()
    except OSError as e:
        raise StorageError(f"synonyms.json could not be saved ({describe_os_error(e)}); nothing changed.") \
            from None
    if added:
        ctx.committed = True
        ctx.changes = [{"kind": "synonyms.add", "before": None, "after": terms}]
    cls = sorted(svc.synonyms.classes.of[normalize(terms[0])])
    return {"terms": terms, "added": added, "class": cls}


def set_group(svc: Service, index: int | None, terms: list[str] | None,
                      actor: str = "operator") -> dict[str, Any]:
    """Operators' synonym editing: index None adds, terms None removes, both replace."""
    params = {"index": index, "terms": terms}

    def apply():
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
            new.append(clean)
        elif clean is None:
            del new[index]
        else:
            new[index] = clean
        svc.synonyms.replace_groups(new)
        svc.retriever.teach_jieba()
        kind = "synonyms.add" if before is None else ("synonyms.remove" if clean is None else "synonyms.update")
        return {"groups": len(new)}, [{"kind": kind, "before": before, "after": clean}]

    return svc.operate("zcor/synonyms/set", params, actor, apply, "synonyms.json")
