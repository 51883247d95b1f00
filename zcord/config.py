"""Run-time settings of one Memory directory (config.json), changeable without a restart.

The API key is never stored here: it comes from ZCOR_LLM_API_KEY or, under systemd, from
$CREDENTIALS_DIRECTORY/llm-api-key. Environment variables override the file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from .errors import InvalidArgument, StateFileInvalid
from .fsutil import atomic_write


class _Base(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid",
                              validate_assignment=True)


class LlmConfig(_Base):
    """The deployment's LLM provider: used by zcor_memory_search and by `zcor chat`."""

    protocol: Literal["openai", "anthropic"] = "openai"
    """Wire format: OpenAI-compatible Chat Completions or Anthropic Messages."""
    base_url: str = "http://127.0.0.1:8080/v1"
    """Where the provider listens, e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1."""
    model: str = ""
    """Model name sent with each request; empty means not configured."""
    timeout_seconds: float = Field(30.0, gt=0, le=600)
    """How long one request may take before it is an error."""


class Config(_Base):
    recall_budget: int = Field(6000, ge=0, le=1_000_000)
    """Characters of the auto-recall context header; 0 turns auto-recall off."""
    relationship_memory: bool = True
    """Whether the model gets the relationship tools and their guidance."""
    recall_senders: bool = True
    """Whether the context header starts with the relationship of each speaker of the batch
    (an external event's senderKey equal to a personId or an alias); needs relationship memory."""
    recall_ranking: Literal["weighted", "seed"] = "weighted"
    """How auto-recall and search candidates are ordered: "weighted" by the rarity of the
    matching terms, with a relevance floor; "seed" by the number of distinct matching terms."""
    llm: LlmConfig = Field(default_factory=LlmConfig)

    def public(self, api_key_set: bool) -> dict[str, Any]:
        out = self.model_dump(mode="json", by_alias=True)
        out["llm"]["apiKeySet"] = api_key_set
        return out


ENV_OVERRIDES = {
    "ZCOR_LLM_PROTOCOL": "protocol",
    "ZCOR_LLM_BASE_URL": "base_url",
    "ZCOR_LLM_MODEL": "model",
}


def api_key() -> str | None:
    """The LLM API key from the environment or a systemd credential, never from config.json."""
    key = os.environ.get("ZCOR_LLM_API_KEY")
    if key:
        return key.strip()
    cred_dir = os.environ.get("CREDENTIALS_DIRECTORY")
    if cred_dir:
        path = Path(cred_dir) / "llm-api-key"
        if path.is_file():
            return path.read_text().strip() or None
    return None


class ConfigFile:
    """config.json in the Memory directory; `effective` has the environment applied on top."""

    def __init__(self, path: Path):
        self.path = path
        self.stored = Config()
        self.effective = Config()

    def _read(self) -> Config:
        """The file's settings (defaults when there is none); StateFileInvalid when broken."""
        if not self.path.exists():
            return Config()
        try:
            raw = json.loads(self.path.read_bytes())
            return Config.model_validate(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise StateFileInvalid(f"{self.path.name} is not valid JSON ({e})") from None
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise StateFileInvalid(f"{self.path.name}: {loc}: {first['msg']}") from None

    def load(self) -> Config:
        stored = self._read()
        self.stored = stored
        self.effective = self._with_env(stored)
        return self.effective

    @staticmethod
    def _with_env(cfg: Config) -> Config:
        llm = cfg.llm.model_copy()
        for env, attr in ENV_OVERRIDES.items():
            value = os.environ.get(env)
            if value:
                try:
                    setattr(llm, attr, value)
                except ValidationError as e:
                    raise StateFileInvalid(f"environment variable {env}: {e.errors()[0]['msg']}") from None
        return cfg.model_copy(update={"llm": llm})

    def update(self, patch: dict[str, Any]) -> Config:
        """Apply a partial change (camelCase keys, nested for llm) and save it atomically."""
        if not isinstance(patch, dict):
            raise InvalidArgument("config patch must be a JSON object", field="patch")
        merged = self.stored.model_dump(mode="json", by_alias=True)
        for key, value in patch.items():
            if key == "llm" and isinstance(value, dict):
                merged["llm"].update(value)
            else:
                merged[key] = value
        try:
            new = Config.model_validate(merged)
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise InvalidArgument(f"{loc}: {first['msg']}", field=loc) from None
        data = json.dumps(new.model_dump(mode="json", by_alias=True), ensure_ascii=False, indent=2) + "\n"
        try:
            self._read()  # a broken hand edit is for the operator to fix, never for us to replace
        except StateFileInvalid as e:
            raise StateFileInvalid(f"{e.message}; fix the file by hand first (it was left as it is)") from None
        atomic_write(self.path, data.encode())
        self.stored = new
        self.effective = self._with_env(new)
        return self.effective
