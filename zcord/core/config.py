"""Run-time settings of one Memory directory (config.json), changeable without a restart.

The API key is never stored here: it comes from ZCOR_LLM_API_KEY or, under systemd, from
$CREDENTIALS_DIRECTORY/llm-api-key. Environment variables override the file.

The key is only ever sent to a base URL the deployment fixed outside the socket
(`key_urls()`): ZCOR_LLM_BASE_URL, or the lines of $CREDENTIALS_DIRECTORY/llm-base-url
(a root-only file loaded by the unit). A baseUrl set over the socket, by anyone, gets
requests without the key until the deployment names it there too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from .errors import InvalidArgument, StateFileInvalid
from .fsutil import atomic_write, read_plain_file
from .invalid import sentence


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
    prompt_cache_key: Literal["auto", "on", "off"] = "auto"
    """Whether OpenAI-protocol requests carry `prompt_cache_key` (a digest of the zcor session)
    so that one session's requests meet the same prompt cache: "auto" sends it to
    api.openai.com only (other providers may refuse an unknown field), "on" always, "off" never."""


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
    recall_log_entries: int = Field(200, ge=0, le=10_000)
    """Auto-recall batches kept per session in recall-log/ (what the bot was shown: the ids,
    why each was recalled, the header's size); 0 keeps none."""
    recall_log_bytes: int = Field(64 << 20, ge=1 << 16, le=1 << 40)
    """Bytes recall-log/ may hold in all; past it the sessions written least recently are
    forgotten first."""
    llm: LlmConfig = Field(default_factory=LlmConfig)
    operator_group: str = Field("zcor-operators", min_length=1, max_length=64)
    """Members of this group (besides zcord's own user and root) may be the operator. Set by
    the deployment (config.json or ZCOR_OPERATOR_GROUP), never over the socket."""
    max_connections: int = Field(256, ge=1, le=100_000)
    """Clients connected at once; one more is told so and disconnected."""
    operator_connections: int = Field(16, ge=0, le=100_000)
    """Of maxConnections, this many are kept for clients that may be the operator (zcord's
    user, root, the operator group): the others share the rest."""
    max_connections_per_uid: int = Field(128, ge=1, le=100_000)
    """Connections at once from one uid that may not be the operator."""
    max_connections_per_pid: int = Field(32, ge=1, le=100_000)
    """Connections at once from one process that may not be the operator."""
    init_timeout_seconds: float = Field(10.0, gt=0, le=3600)
    """A connection that has not sent initialize by then is closed."""
    bot_backup_interval_seconds: int = Field(600, ge=0, le=7 * 86400)
    """The bot may call zcor_memory_backup at most once per this many seconds."""
    max_bot_backups: int = Field(20, ge=1, le=10_000)
    """Backups the bot made with zcor_memory_backup kept; older ones are deleted. The copies
    taken before a restore (the way back) and operators' backups are never deleted
    automatically."""
    bot_restore_interval_seconds: int = Field(600, ge=0, le=7 * 86400)
    """The bot may call zcor_memory_restore at most once per this many seconds (each restore
    keeps a pre-restore copy of the whole Memory, which is never pruned)."""
    max_bot_synonym_groups: int = Field(200, ge=0, le=1_000_000)
    """Synonym groups the bot may add with zcor_synonyms_add (operators' are not counted)."""
    bot_log_bytes_per_minute: int = Field(1 << 20, ge=0, le=1 << 40)
    """Bytes of parameters the bot's calls that change nothing (reads, queries, refused
    calls) may add to operations.jsonl per minute; past it their records keep only a marker
    (the calls are still answered and recorded)."""
    bot_usage_reports_per_minute: int = Field(600, ge=0, le=1_000_000)
    """Token-usage reports (zcor/usage/report) the bot may send per minute, all its
    connections together (a burst of this many, refilled evenly); past it a report is
    refused with rate_limited and not counted. Operators are not limited."""
    max_restore_bytes: int = Field(512 << 20, ge=1, le=1 << 40)
    """A backup file larger than this is refused before it is read."""
    max_restore_nodes: int = Field(200_000, ge=0, le=100_000_000)
    """A backup holding more memories than this is refused before they are validated."""
    max_restore_relationships: int = Field(200_000, ge=0, le=100_000_000)
    """A backup holding more relationships than this is refused likewise."""
    max_restore_depth: int = Field(64, ge=8, le=512)
    """A backup whose JSON nests arrays and objects deeper than this is refused before it is
    parsed (a zcor state nests about 8 deep)."""
    default_trust: Literal["trusted", "normal", "untrusted", "blocked"] = "normal"
    """The trust level of a sender without one of its own (zcor/trust/set): "normal" changes
    nothing; "untrusted" holds their changes for review; "blocked" refuses them."""

    private_scope: Literal["session", "everywhere"] = "session"
    """What a private (one-to-one) conversation creates: "session" keeps it to that session
    (recalled, shown and readable there only, never in the shared prefix); "everywhere"
    treats it as any other memory (the behaviour before issue 34)."""

    def public(self, api_key_set: bool, withheld: str | None = None) -> dict[str, Any]:
        out = self.model_dump(mode="json", by_alias=True)
        out["llm"]["apiKeySet"] = api_key_set
        out["llm"]["apiKeyWithheld"] = withheld is not None
        out["llm"]["apiKeyWithheldReason"] = withheld
        return out


ENV_OVERRIDES = {
    "ZCOR_LLM_PROTOCOL": "protocol",
    "ZCOR_LLM_BASE_URL": "base_url",
    "ZCOR_LLM_MODEL": "model",
}
DEPLOYMENT_ONLY = {"operatorGroup": "ZCOR_OPERATOR_GROUP"}
"""Settings that decide who is trusted: config.json or the environment, never the socket."""
KEY_URL_CREDENTIAL = "llm-base-url"


def _norm_url(url: str) -> str:
    return url.strip().rstrip("/")


def key_urls() -> list[str]:
    """The base URLs the deployment confirmed for the API key (outside the socket)."""
    urls = []
    env = os.environ.get("ZCOR_LLM_BASE_URL")
    if env and env.strip():
        urls.append(_norm_url(env))
    cred_dir = os.environ.get("CREDENTIALS_DIRECTORY")
    if cred_dir:
        path = Path(cred_dir) / KEY_URL_CREDENTIAL
        try:
            lines = path.read_text().splitlines() if path.is_file() else []
        except OSError:
            lines = []
        urls += [_norm_url(x) for x in lines if x.strip() and not x.lstrip().startswith("#")]
    return urls


def key_withheld_reason(base_url: str) -> str | None:
    """Why the API key is not sent to base_url, or None when it may be."""
    if _norm_url(base_url) in key_urls():
        return None
    return (f"the API key is not sent to {base_url}: that base URL was not confirmed by the deployment. "
            f"Set ZCOR_LLM_BASE_URL (or the credential {KEY_URL_CREDENTIAL}) to it, outside the socket, "
            f"to send the key there.")


def api_key_for(base_url: str) -> str | None:
    """The API key when base_url is one the deployment confirmed; else None (requests go keyless)."""
    if key_withheld_reason(base_url) is not None:
        return None
    return api_key()


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
        try:
            data = read_plain_file(self.path)
        except FileNotFoundError:
            return Config()
        try:
            raw = json.loads(data)
            return Config.model_validate(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise StateFileInvalid(f"{self.path.name} is not valid JSON ({e})") from None
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise StateFileInvalid(f"{self.path.name}: {sentence(loc, first, Config)}") from None

    def load(self) -> Config:
        stored = self._read()
        self.stored = stored
        self.effective = self._with_env(stored)
        return self.effective

    @staticmethod
    def _with_env(cfg: Config) -> Config:
        group = os.environ.get("ZCOR_OPERATOR_GROUP")
        if group and group.strip():
            cfg = cfg.model_copy(update={"operator_group": group.strip()})
        llm = cfg.llm.model_copy()
        for env, attr in ENV_OVERRIDES.items():
            value = os.environ.get(env)
            if value:
                try:
                    setattr(llm, attr, value)
                except ValidationError as e:
                    raise StateFileInvalid(f"environment variable {env}: {sentence('', e.errors()[0])}") from None
        return cfg.model_copy(update={"llm": llm})

    def update(self, patch: dict[str, Any]) -> Config:
        """Apply a partial change (camelCase keys, nested for llm) and save it atomically."""
        if not isinstance(patch, dict):
            raise InvalidArgument("config patch must be a JSON object", field="patch")
        merged = self.stored.model_dump(mode="json", by_alias=True)
        for key, env in DEPLOYMENT_ONLY.items():
            if key in patch and patch[key] != merged.get(key):
                raise InvalidArgument(f"{key} decides who may be the operator, so it is set by the deployment "
                                      f"(config.json edited as zcord's user, or {env}), not over the socket",
                                      field=key)
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
            raise InvalidArgument(sentence(loc, first, Config), field=loc) from None
        data = json.dumps(new.model_dump(mode="json", by_alias=True), ensure_ascii=False, indent=2) + "\n"
        try:
            self._read()  # a broken hand edit is for the operator to fix, never for us to replace
        except StateFileInvalid as e:
            raise StateFileInvalid(f"{e.message}; fix the file by hand first (it was left as it is)") from None
        atomic_write(self.path, data.encode())
        self.stored = new
        self.effective = self._with_env(new)
        return self.effective
