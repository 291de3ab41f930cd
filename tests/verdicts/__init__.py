"""The same specs for every judge of a GRPOJob: the API server, the operator, and the local tools."""
