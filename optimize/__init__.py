"""Optimization: DSPy compilation of the program's prompts, and Optuna tuning of its thresholds by replay."""
