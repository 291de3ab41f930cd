"""Training engines: each turns a resolved GRPOJob into a run of one training stack."""
