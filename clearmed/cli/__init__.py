"""The `clearmed` command line: `main` (the entry point, the options every command shares: `-c`, `--set`,
`--program-artifact`; ask, demo and config) and one module per other command, each imported only when its command
is chosen: `evaluate` (eval), `suite`, `merge`, `report`, `export`, `export_sft`, `index`, `compile`, `tune`,
`doctor`."""
