"""clearmed.backbones"""
