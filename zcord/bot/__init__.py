"""bot: programs that talk to zcord as a bot does.

Owns the bot library (bot: a conversation loop that relays tool calls, asks for the
prefix, recall and context), the console chat (chat), the OpenAI-compatible endpoint for
chat front ends (proxy: `zcor serve-openai`) and the in-process demo (demo).

May import: zcord.transport.client, zcord.retrieval.llm and zcord.core; demo also runs a
Service in-process. Never zcord.transport.server, textual or zcor_tui.
"""

from ..core.config import LlmConfig
from ..retrieval.llm import Provider, anthropic_tools, openai_tools
from .bot import Conversation, MemoryBot

__all__ = ["Conversation", "LlmConfig", "MemoryBot", "Provider", "anthropic_tools", "openai_tools"]
