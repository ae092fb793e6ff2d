"""clearmed.metrics"""
