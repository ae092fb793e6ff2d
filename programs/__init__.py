"""clearmed.programs"""
