"""The operator's settings (a part of the Service, `settings`): config.json, PERSONA.md,
the synonym groups' listing and per-sender trust (trust.json). Every change is an
operator action the dispatcher runs and records (Calls.operate), with before and after.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..core.config import Config, ConfigFile, api_key, key_withheld_reason
from ..core.errors import InvalidArgument
from ..core.fsutil import atomic_write
from ..core.layout import PERSONA_FILE
from ..core.persona import persona_text
from ..core.senderkey import sender_key
from .trust import TRUST_FILE

if TYPE_CHECKING:
    from ..retrieval.synonyms import Synonyms
    from .parts import Calls
    from .trust import TrustBook

log = logging.getLogger(__name__)

MAX_PERSONA = 100_000  # characters of PERSONA.md, which goes into every request


class SettingsHost(Protocol):
    """What the settings use of the Service."""

    @property
    def lock(self) -> AbstractContextManager[Any]: ...
    @property
    def dir(self) -> Path: ...
    @property
    def config(self) -> Config: ...
    @property
    def config_file(self) -> ConfigFile: ...
    @property
    def synonyms(self) -> Synonyms: ...
    @property
    def trust(self) -> TrustBook: ...
    @property
    def calls(self) -> Calls: ...

    def refresh_synonyms(self) -> None: ...


class Settings:
    """config.json, PERSONA.md, the synonym groups and trust.json as the operator reads and
    changes them."""

    def __init__(self, svc: SettingsHost) -> None:
        self.svc = svc

    def public_config(self) -> dict[str, Any]:
        svc = self.svc
        key_set = api_key() is not None
        withheld = key_withheld_reason(svc.config.llm.base_url) if key_set else None
        return svc.config.public(api_key_set=key_set, withheld=withheld)

    def update_config(self, patch: dict[str, Any], actor: str = "operator") -> dict[str, Any]:
        """Change config.json (partial, camelCase keys); recorded in the operation log."""
        svc = self.svc

        def apply() -> tuple[dict[str, Any], list[dict[str, Any]]]:
            before = svc.config_file.stored.model_dump(mode="json", by_alias=True)
            svc.config_file.update(patch)
            after = svc.config_file.stored.model_dump(mode="json", by_alias=True)
            return self.public_config(), [{"kind": "config.update", "before": before, "after": after}]

        result: dict[str, Any] = svc.calls.operate("zcor/config/set", {"patch": patch}, actor, apply, "config.json")
        return result

    def persona_get(self) -> dict[str, Any]:
        """PERSONA.md as stored (`text`, comments included) and whether it is empty for the model."""
        svc = self.svc
        path = svc.dir / PERSONA_FILE
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            text = ""
        return {"text": text, "empty": not persona_text(text), "path": str(path)}

    def persona_set(self, text: Any, actor: str = "operator") -> dict[str, Any]:
        """Replace PERSONA.md (atomically); recorded in the operation log with before and after."""
        svc = self.svc
        if not isinstance(text, str):
            raise InvalidArgument("text must be a string: the whole new PERSONA.md", field="text")
        if len(text) > MAX_PERSONA:
            raise InvalidArgument(f"text is {len(text):,} characters; PERSONA.md may have at most {MAX_PERSONA:,}",
                                  field="text")
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgument("text contains a lone surrogate code point, which is not valid Unicode",
                                  field="text") from None

        def apply() -> tuple[dict[str, Any], list[dict[str, Any]]]:
            before = self.persona_get()["text"]
            if before == text:
                return self.persona_get(), []
            atomic_write(svc.dir / PERSONA_FILE, data)
            return self.persona_get(), [{"kind": "persona.update", "target": PERSONA_FILE,
                                         "before": before, "after": text}]

        result: dict[str, Any] = svc.calls.operate("zcor/persona/set", {"text": text}, actor, apply, PERSONA_FILE)
        return result

    def synonym_groups(self) -> list[list[str]]:
        svc = self.svc
        with svc.lock:
            svc.refresh_synonyms()
            return [list(g) for g in svc.synonyms.groups]

    def reload(self) -> None:
        """Re-read config.json and synonyms.json (SIGHUP); a broken file keeps the old values."""
        svc = self.svc
        with svc.lock:
            svc.config_file.load()
            svc.synonyms.load()

    def trust_get(self) -> dict[str, Any]:
        svc = self.svc
        with svc.lock:
            return svc.trust.listing(svc.config.default_trust)

    def trust_set(self, params: Any, actor: str = "operator") -> dict[str, Any]:
        """Give a sender a trust level (level null: back to defaultTrust); trust.json is
        replaced atomically and the change recorded in the operation log."""
        svc = self.svc
        if not isinstance(params, dict) or set(params) - {"sender", "level"} or "sender" not in params \
                or "level" not in params:
            raise InvalidArgument("params must be {sender, level}: level one of trusted, normal, untrusted, "
                                  "blocked, or null for the default", field="level" if isinstance(params, dict)
                                  and "sender" in params else "sender")

        def apply() -> tuple[dict[str, Any], list[dict[str, Any]]]:
            before, after = svc.trust.set(params["sender"], params["level"])
            key = sender_key(params["sender"])  # kept and shown in comparison form
            out = {"sender": key, "level": svc.trust.level(key, svc.config.default_trust),
                   "explicit": after is not None}
            return out, ([] if before == after else
                         [{"kind": "trust.set", "target": key, "before": before, "after": after}])

        result: dict[str, Any] = svc.calls.operate("zcor/trust/set", dict(params), actor, apply, TRUST_FILE)
        return result
