"""bot: programs that talk to zcord as a bot does.

Owns the bot core (core: the tool-call rule, the tool loop and the request layout, with no
I/O), the bot library (bot: its synchronous driver, which asks zcord for the prefix, recall
and context and relays the model's tool calls), the console chat (chat), the
OpenAI-compatible endpoint for chat front ends (proxy: `zcor serve-openai`, the core's
asyncio driver) and the in-process demo (demo).

May import: zcord.transport.client, zcord.retrieval.llm and zcord.core; demo also runs a
Service in-process. Never zcord.transport.server, textual or zcor_tui.
"""

from ..core.config import LlmConfig
from ..retrieval.llm import Provider, anthropic_tools, openai_tools
from .bot import Conversation, MemoryBot
from .core import Turn

__all__ = ["Conversation", "LlmConfig", "MemoryBot", "Provider", "Turn", "anthropic_tools", "openai_tools"]
