"""Widgets of the zcor TUI."""
