"""clearmed.benchmarks"""
