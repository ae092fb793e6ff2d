"""The `clearmed` command line: `main` (the entry point, ask, demo and config) and one module per other command,
each imported only when its command is chosen."""
