"""clearmed.retrieval"""
