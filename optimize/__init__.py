"""clearmed.optimize"""
