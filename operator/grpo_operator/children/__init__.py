"""Pure builders: a parsed GRPOJob (plus settings) in, child manifests (plain dicts) out.

Nothing here talks to the API server. Names are deterministic, so building twice and applying
twice is harmless, and golden tests pin the output.
"""
