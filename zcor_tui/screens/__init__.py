"""The screens of the zcor TUI (one per App mode) and its dialogs."""
