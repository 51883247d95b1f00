"""The public client API: how bots, the CLI and the TUI reach zcord (the socket client in
zcord.transport.client, and the socket locations the TUI's launcher needs). Import from
here; it stays where it is when the packages below it move."""

from .core.origin import describe as describe_origin
from .transport.affinity import affinity_series, sparkline, sparkline_scale
from .transport.client import *  # noqa: F401,F403
from .transport.client import __all__ as _client_all
from .transport.client import initialize_params
from .transport.client_calls import (  # the typed tool calls' arguments
    ChildrenArgs,
    MergeArgs,
    QueryArgs,
    RelQueryArgs,
    RelWriteArgs,
    SupersedeArgs,
    WriteArgs,
)
from .transport.interop_client import arun as arun_steps
from .transport.interop_client import export_steps, import_steps, write_export
from .transport.interop_client import run as run_steps
from .transport.paths import SYSTEM_SOCKET, client_socket, default_socket, memory_dir
from .transport.provider_usage import provider_usage
from .transport.results import Config, ErasureResult  # result models the TUI names
from .transport.shown import UNSAFE, invisible_marked, json_shown, shown

# time forms and log-record targets, shared by `zcor` and the TUI (importable, not in __all__)
from .transport.timeforms import parse_instant as parse_instant
from .transport.timeforms import parse_local as parse_local
from .transport.wording import change_targets as change_targets
from .transport.wording import (
    for_operator,
    human_size,
)

__all__ = [*_client_all, "initialize_params", "for_operator", "human_size", "SYSTEM_SOCKET", "client_socket",
           "default_socket", "memory_dir", "describe_origin", "UNSAFE", "shown", "json_shown",
           "invisible_marked", "affinity_series", "sparkline", "import_steps", "export_steps", "run_steps",
           "arun_steps", "write_export",
           "provider_usage", "sparkline_scale", "ChildrenArgs", "MergeArgs", "QueryArgs", "RelQueryArgs",
           "RelWriteArgs", "SupersedeArgs", "WriteArgs", "Config", "ErasureResult"]
