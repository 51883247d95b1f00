"""zcord: the zcor memory daemon and everything a bot needs to talk to it.

Layers, each importing only the ones below it (kept by the import contracts in
pyproject.toml): cli (the commands) > bot (bots built on the client) > transport (the
socket: server, connections, methods, client) > service (the tools' rules: dispatcher and
rooms) > retrieval (recall, ranking, synonyms, prefix, providers) > core (the Memory:
models, state, store, journal, operation log, text, errors, protocol shapes).
`zcord.client` is the public client API.
"""

__version__ = "0.1.0"
