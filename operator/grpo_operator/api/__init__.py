"""The GRPOJob API: pydantic models are the one definition; `crds/` is generated from them."""
