"""zcor-tui: the operator's Textual app (talks to zcord only through zcord.client)."""
