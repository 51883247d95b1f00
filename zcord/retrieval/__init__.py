"""retrieval: finding the memories that matter, without changing any.

Owns synonym groups and their expansion (synonyms), auto-recall, its ranking modes and
the search candidates (recall), the system prefix (prefix) and the LLM providers' wire
formats (llm: the search tool's filter and the console bot's chat).

May import: zcord.core. Never the service, transport or bot layers, textual or zcor_tui.
"""
