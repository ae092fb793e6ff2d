"""clearmed.signatures"""
